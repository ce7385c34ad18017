//! HF GPT-2 names -> TransformerLens names and shapes, as TL's `convert_gpt2_weights`: Conv1D weights are
//! already `[in, out]`; `c_attn` is `[Q | K | V]` along its output axis, each split into heads; `W_U` is
//! `lm_head.weight` transposed, or `W_E` transposed when tied (absent); `b_U` is zero; `W_pos` is cut to
//! `n_ctx` rows.

use std::collections::BTreeMap;

use anyhow::{ensure, Context, Result};
use microlens::Config;

use crate::import::layout::transpose;
use crate::import::state_dict::{StateDict, Tensor};

/// Whether the names are HF GPT-2's (`wte.weight`, optionally under `transformer.`).
pub(super) fn is_hf_gpt2<'a>(mut names: impl Iterator<Item = &'a String>) -> bool {
    names.any(|n| n == "wte.weight" || n == "transformer.wte.weight")
}

/// HF's attention buffers (`attn.bias` causal mask, `attn.masked_bias`), not parameters.
pub(super) fn is_buffer(name: &str) -> bool {
    let name = name.strip_prefix("transformer.").unwrap_or(name);
    name.starts_with("h.") && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"))
}

/// The HF tensors, taken one by one with their shape checked.
struct Hf(BTreeMap<String, Tensor>);

impl Hf {
    fn take(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let t = self
            .0
            .remove(name)
            .with_context(|| format!("missing tensor {name} (HF GPT-2)"))?;
        ensure!(
            t.shape == shape,
            "tensor {name} has shape {:?}, the config needs {shape:?}",
            t.shape
        );
        Ok(t.data)
    }
}

/// `[rows, cols]` columns `c0..c0 + h*d` as TL's `[h, rows, d]`: `out[h][r][i] = x[r][c0 + h*d + i]`.
fn split_heads(x: &[f32], rows: usize, cols: usize, c0: usize, h: usize, d: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(h * rows * d);
    for head in 0..h {
        for r in 0..rows {
            out.extend_from_slice(&x[r * cols + c0 + head * d..r * cols + c0 + (head + 1) * d]);
        }
    }
    out
}

/// Maps an HF GPT-2 state dict (buffers already dropped) to TL names for `cfg`.
pub(super) fn to_tl(tensors: BTreeMap<String, Tensor>, cfg: &Config) -> Result<StateDict> {
    let tensors = tensors.into_iter().map(|(k, v)| {
        (
            k.strip_prefix("transformer.")
                .map(str::to_string)
                .unwrap_or(k),
            v,
        )
    });
    let mut hf = Hf(tensors.collect());
    let (m, h, d, f, v) = (
        cfg.d_model,
        cfg.n_heads,
        cfg.d_head,
        cfg.d_mlp_or_zero(),
        cfg.d_vocab,
    );
    let a = h * d;
    let mut sd = StateDict::new();
    let mut put = |name: String, shape: Vec<usize>, data: Vec<f32>| -> Result<()> {
        sd.insert(name, Tensor::new(shape, data)?);
        Ok(())
    };
    let w_e = hf.take("wte.weight", &[v, m])?;
    let wpe =
        hf.0.get("wpe.weight")
            .map(|t| t.shape.clone())
            .unwrap_or_default();
    ensure!(
        wpe.len() == 2 && wpe[0] >= cfg.n_ctx,
        "tensor wpe.weight has shape {wpe:?}, the config needs [>= {}, {m}]",
        cfg.n_ctx
    );
    let w_pos = hf.take("wpe.weight", &wpe)?;
    put(
        "pos_embed.W_pos".into(),
        vec![cfg.n_ctx, m],
        w_pos[..cfg.n_ctx * m].to_vec(),
    )?;
    for l in 0..cfg.n_layers {
        let (hfp, tl) = (format!("h.{l}."), format!("blocks.{l}."));
        for (hf_ln, tl_ln) in [("ln_1", "ln1"), ("ln_2", "ln2")] {
            put(
                format!("{tl}{tl_ln}.w"),
                vec![m],
                hf.take(&format!("{hfp}{hf_ln}.weight"), &[m])?,
            )?;
            put(
                format!("{tl}{tl_ln}.b"),
                vec![m],
                hf.take(&format!("{hfp}{hf_ln}.bias"), &[m])?,
            )?;
        }
        let w = hf.take(&format!("{hfp}attn.c_attn.weight"), &[m, 3 * a])?;
        let b = hf.take(&format!("{hfp}attn.c_attn.bias"), &[3 * a])?;
        for (i, x) in ["Q", "K", "V"].iter().enumerate() {
            put(
                format!("{tl}attn.W_{x}"),
                vec![h, m, d],
                split_heads(&w, m, 3 * a, i * a, h, d),
            )?;
            put(
                format!("{tl}attn.b_{x}"),
                vec![h, d],
                b[i * a..(i + 1) * a].to_vec(),
            )?;
        }
        put(
            format!("{tl}attn.W_O"),
            vec![h, d, m],
            hf.take(&format!("{hfp}attn.c_proj.weight"), &[a, m])?,
        )?;
        put(
            format!("{tl}attn.b_O"),
            vec![m],
            hf.take(&format!("{hfp}attn.c_proj.bias"), &[m])?,
        )?;
        put(
            format!("{tl}mlp.W_in"),
            vec![m, f],
            hf.take(&format!("{hfp}mlp.c_fc.weight"), &[m, f])?,
        )?;
        put(
            format!("{tl}mlp.b_in"),
            vec![f],
            hf.take(&format!("{hfp}mlp.c_fc.bias"), &[f])?,
        )?;
        put(
            format!("{tl}mlp.W_out"),
            vec![f, m],
            hf.take(&format!("{hfp}mlp.c_proj.weight"), &[f, m])?,
        )?;
        put(
            format!("{tl}mlp.b_out"),
            vec![m],
            hf.take(&format!("{hfp}mlp.c_proj.bias"), &[m])?,
        )?;
    }
    put("ln_final.w".into(), vec![m], hf.take("ln_f.weight", &[m])?)?;
    put("ln_final.b".into(), vec![m], hf.take("ln_f.bias", &[m])?)?;
    // Tied unembedding: HF stores no lm_head.weight, it is wte.weight.
    let lm_head = if hf.0.contains_key("lm_head.weight") {
        hf.take("lm_head.weight", &[v, m])?
    } else {
        w_e.clone()
    };
    put(
        "unembed.W_U".into(),
        vec![m, v],
        transpose([1, v, m], &lm_head),
    )?;
    put("unembed.b_U".into(), vec![v], vec![0.0; v])?;
    put("embed.W_E".into(), vec![v, m], w_e)?;
    if let Some(name) = hf.0.keys().next() {
        anyhow::bail!("unexpected tensor {name} in an HF GPT-2 checkpoint (not a parameter of a model with this config)");
    }
    Ok(sd)
}
