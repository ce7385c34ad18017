//! TransformerLens 2.x weight processing (`process_weights_`) on a TL-named [`StateDict`], one function per
//! TL step, applied in TL's order: `fold_layer_norm`, `center_writing_weights`, `center_unembed`,
//! `fold_value_biases`. Every step preserves the log-probs exactly (up to rounding); arithmetic is `f64`.

use anyhow::{ensure, Result};
use microlens::blob::Processing;
use microlens::{Config, Normalization, Positional, TensorId, TensorKind};

use crate::import::state_dict::{StateDict, Tensor};

/// Which processing steps to apply; each flag turns one step off. `Default` is all on, as
/// `from_pretrained` and `process_weights_` default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessingOptions {
    /// Fold norm weights (and LN biases) into the matrices that read the normalised stream.
    pub fold_ln: bool,
    /// Centre the writing weights over `d_model` (LN/LNPre models only).
    pub center_writing_weights: bool,
    /// Centre `W_U` and `b_U` over the vocabulary.
    pub center_unembed: bool,
    /// Fold `b_V` into `b_O`.
    pub fold_value_biases: bool,
}

impl Default for ProcessingOptions {
    fn default() -> Self {
        ProcessingOptions {
            fold_ln: true,
            center_writing_weights: true,
            center_unembed: true,
            fold_value_biases: true,
        }
    }
}

impl ProcessingOptions {
    /// No processing at all (`from_pretrained_no_processing`).
    pub const fn none() -> Self {
        ProcessingOptions {
            fold_ln: false,
            center_writing_weights: false,
            center_unembed: false,
            fold_value_biases: false,
        }
    }
}

fn name(kind: TensorKind, layer: usize) -> String {
    TensorId::layer(kind, layer).to_string()
}

/// Runs the steps `opts` asks for, in TL's order, on `sd` (which holds the checkpoint of `cfg`). Returns
/// the config of the processed computation (after `fold_ln`: LN -> LNPre, RMS -> RMSPre) and the record
/// of what was applied. As in TL: `fold_ln` needs norm weights (LN, RMS); RMS folds only the scale, never
/// centres; `center_writing_weights` needs a centring norm (LN, LNPre); `None` gets neither.
pub fn process_weights(
    sd: &mut StateDict,
    cfg: &Config,
    opts: &ProcessingOptions,
) -> Result<(Config, Processing)> {
    let original = cfg.normalization;
    let mut out = *cfg;
    let fold_ln = opts.fold_ln && original.has_weight();
    ensure!(
        !(fold_ln && original.has_bias() && cfg.gated_mlp && !cfg.attn_only()),
        "fold_ln of a LayerNorm before a gated MLP is not exact (ln2's bias would have to pass through \
         the gate): convert with --no-fold-ln"
    );
    if fold_ln {
        let lnpre = original.centers();
        fold_layer_norm(sd, cfg, lnpre, lnpre)?;
        out.normalization = if lnpre {
            Normalization::LNPre
        } else {
            Normalization::RMSPre
        };
    }
    let center_writing = opts.center_writing_weights && original.centers();
    if center_writing {
        center_writing_weights(sd, cfg)?;
    }
    if opts.center_unembed {
        center_unembed(sd)?;
    }
    if opts.fold_value_biases {
        fold_value_biases(sd, cfg)?;
    }
    let processing = Processing {
        fold_ln,
        center_writing_weights: center_writing,
        center_unembed: opts.center_unembed,
        fold_value_biases: opts.fold_value_biases,
        original_normalization: original,
    };
    Ok((out, processing))
}

/// Folds a norm into one reader `W` (`[batch, m, n]`) with bias `b_W` (`[batch, n]`):
/// `b_W += b @ W` (if `b`), `W <- diag(w) W`, then (if `center`) `W -= mean over m`.
fn fold_into_reader(
    w: &[f32],
    b: Option<&[f32]>,
    weight: &mut Tensor,
    bias: &mut Tensor,
    center: bool,
) {
    let m = w.len();
    let n = weight.shape.last().copied().unwrap_or(1);
    for (mat, bias) in weight
        .data
        .chunks_exact_mut(m * n)
        .zip(bias.data.chunks_exact_mut(n))
    {
        for (j, bj) in bias.iter_mut().enumerate() {
            let col = (0..m).map(|c| mat[c * n + j] as f64);
            if let Some(b) = b {
                *bj = (*bj as f64 + col.clone().zip(b).map(|(x, &b)| x * b as f64).sum::<f64>())
                    as f32;
            }
            let scaled: Vec<f64> = col.zip(w).map(|(x, &w)| x * w as f64).collect();
            let mean = if center {
                scaled.iter().sum::<f64>() / m as f64
            } else {
                0.0
            };
            for (c, s) in scaled.iter().enumerate() {
                mat[c * n + j] = (s - mean) as f32;
            }
        }
    }
}

/// Folds the norm `(w, b)` (names) into each reader `(W, b_W)` (names), removing the norm parameters.
fn fold_norm(
    sd: &mut StateDict,
    norm: (String, String),
    readers: &[(String, String)],
    fold_biases: bool,
    center: bool,
) -> Result<()> {
    let w = sd.remove(&norm.0).map(|t| t.data);
    let b = if fold_biases {
        sd.remove(&norm.1).map(|t| t.data)
    } else {
        None
    };
    let Some(w) = w else { return Ok(()) };
    for (weight, bias) in readers {
        let mut bias_t = sd.get(bias)?.clone();
        fold_into_reader(&w, b.as_deref(), sd.get_mut(weight)?, &mut bias_t, center);
        sd.insert(bias.clone(), bias_t);
    }
    Ok(())
}

/// TL's `fold_layer_norm`: `LN(x) W + b_W = LNPre(x) (diag(w) W) + (b_W + b_ln W)` for `ln1` -> `W_Q/W_K/W_V`,
/// `ln2` -> `W_in` and `ln_final` -> `W_U`; with `center_weights` the readers are centred over `d_model`.
pub fn fold_layer_norm(
    sd: &mut StateDict,
    cfg: &Config,
    fold_biases: bool,
    center_weights: bool,
) -> Result<()> {
    for l in 0..cfg.n_layers {
        let qkv = [
            (TensorKind::WQ, TensorKind::BQ),
            (TensorKind::WK, TensorKind::BK),
            (TensorKind::WV, TensorKind::BV),
        ]
        .map(|(w, b)| (name(w, l), name(b, l)));
        fold_norm(
            sd,
            (name(TensorKind::Ln1W, l), name(TensorKind::Ln1B, l)),
            &qkv,
            fold_biases,
            center_weights,
        )?;
        if !cfg.attn_only() {
            let ln2 = (name(TensorKind::Ln2W, l), name(TensorKind::Ln2B, l));
            if cfg.gated_mlp {
                // `W_gate` takes the scale alone (TL: no bias, no centring); `ln2` stays until `W_in`.
                scale_gate(sd, &ln2.0, &name(TensorKind::WGate, l))?;
            }
            let mlp = [(name(TensorKind::WIn, l), name(TensorKind::BIn, l))];
            fold_norm(sd, ln2, &mlp, fold_biases, center_weights)?;
        }
    }
    let unembed = [("unembed.W_U".to_string(), "unembed.b_U".to_string())];
    fold_norm(
        sd,
        ("ln_final.w".into(), "ln_final.b".into()),
        &unembed,
        fold_biases,
        center_weights,
    )
}

/// `W_gate <- diag(w) W_gate` for the norm weight `w` (named `norm_w`, left in `sd`).
fn scale_gate(sd: &mut StateDict, norm_w: &str, gate: &str) -> Result<()> {
    let Ok(w) = sd.get(norm_w).map(|t| t.data.clone()) else {
        return Ok(());
    };
    let gate = sd.get_mut(gate)?;
    let n = gate.shape.last().copied().unwrap_or(1).max(1);
    for (row, &w) in gate.data.chunks_exact_mut(n).zip(&w) {
        row.iter_mut()
            .for_each(|x| *x = (*x as f64 * w as f64) as f32);
    }
    Ok(())
}

/// `x -= mean(x)` over the last axis of `t`, row by row.
fn center_last_axis(t: &mut Tensor) {
    let n = t.shape.last().copied().unwrap_or(1).max(1);
    for row in t.data.chunks_exact_mut(n) {
        let mean = row.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        row.iter_mut().for_each(|x| *x = (*x as f64 - mean) as f32);
    }
}

/// TL's `center_writing_weights`: `W_E`, `W_pos` (standard positions only: shortformer never writes it
/// into the residual, rotary has none), `W_O`, `b_O`, `W_out`, `b_out` centred over `d_model`.
pub fn center_writing_weights(sd: &mut StateDict, cfg: &Config) -> Result<()> {
    let mut names = vec!["embed.W_E".to_string()];
    if cfg.positional == Positional::Standard {
        names.push("pos_embed.W_pos".into());
    }
    for l in 0..cfg.n_layers {
        names.extend([name(TensorKind::WO, l), name(TensorKind::BO, l)]);
        if !cfg.attn_only() {
            names.extend([name(TensorKind::WOut, l), name(TensorKind::BOut, l)]);
        }
    }
    for n in names {
        center_last_axis(sd.get_mut(&n)?);
    }
    Ok(())
}

/// TL's `center_unembed`: `W_U` and `b_U` centred over the vocabulary (logits move by a constant per
/// position, so log-probs do not change).
pub fn center_unembed(sd: &mut StateDict) -> Result<()> {
    center_last_axis(sd.get_mut("unembed.W_U")?);
    center_last_axis(sd.get_mut("unembed.b_U")?);
    Ok(())
}

/// TL's `fold_value_biases`: `b_O += sum_h b_V[h] @ W_O[h]`, `b_V = 0` (exact since pattern rows sum to 1);
/// with grouped-query attention head `h` reads the value bias of its key/value head.
pub fn fold_value_biases(sd: &mut StateDict, cfg: &Config) -> Result<()> {
    let (m, d) = (cfg.d_model, cfg.d_head);
    for l in 0..cfg.n_layers {
        let b_v = sd.get(&name(TensorKind::BV, l))?.data.clone();
        let w_o = &sd.get(&name(TensorKind::WO, l))?.data;
        let extra: Vec<f64> = (0..m)
            .map(|c| {
                (0..cfg.d_attn())
                    .map(|hi| {
                        let b = b_v[cfg.kv_head(hi / d) * d + hi % d];
                        b as f64 * w_o[hi * m + c] as f64
                    })
                    .sum()
            })
            .collect();
        let b_o = sd.get_mut(&name(TensorKind::BO, l))?;
        b_o.data
            .iter_mut()
            .zip(extra)
            .for_each(|(b, e)| *b = (*b as f64 + e) as f32);
        sd.get_mut(&name(TensorKind::BV, l))?
            .data
            .iter_mut()
            .for_each(|b| *b = 0.0);
    }
    Ok(())
}
