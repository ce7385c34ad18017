//! The second moment GPTQ rounds the lookup tables against: `W_E` and `W_pos`, whose rows are added to
//! the residual stream, and the shortformer's `pos_Q`/`pos_K`, whose rows are added to the queries and
//! keys. A row is not multiplied by an input, so what matters is how far its rounding error `e` moves
//! the model's next-token distributions: to second order `eᵀ H e / 2` in KL, with `H` the output Fisher
//! information pulled back to the activation the row is added to ([`moment`]). (Weighting the
//! matrices that read the stream instead, `H = sum_W Wᵀ W / tr(Wᵀ W)`, did less well for `W_E`/`W_pos`.)
//! The same measure at what a matrix writes ([`output_moment_of`]) couples the rows of W8A16's int8
//! matrices ([`super::plan`]).

use anyhow::{anyhow, Result};
use microlens::{Model, TensorId, TensorKind};

use indicatif::{ProgressBar, ProgressStyle};
use microlens::{HookKind, HookPoint, Hooks};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::gptq::{Solver, DAMPING};
use super::matrix_values;
use crate::eval::run::{par_map, run_with_hooks};
use microlens::host::HostWeights;

/// Whether `kind` is a lookup table whose rows are added to an activation (not multiplied by one).
pub fn is_table(kind: TensorKind) -> bool {
    matches!(
        kind,
        TensorKind::WE | TensorKind::WPos | TensorKind::PosQ | TensorKind::PosK
    )
}

/// The activation the rows of table `kind` are added to: `hook_embed` (the residual stream's first
/// term, which `W_pos` joins), or a block's `hook_q`/`hook_k`.
fn added_to(kind: TensorKind) -> Option<HookKind> {
    match kind {
        TensorKind::WE | TensorKind::WPos => Some(HookKind::Embed),
        TensorKind::PosQ => Some(HookKind::Q),
        TensorKind::PosK => Some(HookKind::K),
        _ => None,
    }
}

/// The table whose output moment the rows of table `id` are rounded against: `W_E`'s for `W_pos` (both
/// are added to the residual stream at the embedding), its own for the others.
pub fn moment_of(id: TensorId) -> TensorId {
    match id.kind {
        TensorKind::WPos => TensorId::global(TensorKind::WE),
        _ => id,
    }
}

/// The solver for the tables whose [`moment_of`] is `id` (`act_order`: see [`Solver::new`]).
pub fn solver(
    model: &Model<'_>,
    id: TensorId,
    seqs: &[Vec<u32>],
    act_order: bool,
) -> Result<Solver> {
    let n = id.shape(model.config())[1];
    Solver::new(&moment(model, id, seqs)?, n, DAMPING, act_order)
}

/// The output moment `H` (`[n][n]`, row-major) the rows of table `id` are rounded against, taken at
/// [`moment_of`]`(id)` with central-difference steps of 1% of that table's RMS.
pub fn moment(model: &Model<'_>, id: TensorId, seqs: &[Vec<u32>]) -> Result<Vec<f64>> {
    let id = moment_of(id);
    let table = model
        .matrix(id)
        .ok_or_else(|| anyhow!("the model has no {id}"))?;
    let values = matrix_values(&table);
    let rms = (values.iter().map(|v| (*v as f64).powi(2)).sum::<f64>()
        / values.len().max(1) as f64)
        .sqrt();
    let kind = added_to(id.kind).ok_or_else(|| anyhow!("{id} is not a lookup table"))?;
    let nudge = Nudge {
        kind,
        layer: id.layer,
        d_head: (kind != HookKind::Embed).then_some(model.config().d_head),
        dir: 0,
        eps: (1e-2 * rms).max(1e-6) as f32,
        signs: &[],
    };
    output_moment(model, seqs, nudge, table.cols())
}

/// The output moment at the output of matrix `id` (`[rows][rows]`, row-major): how a change of the
/// activation its rows write (`hook_q`, `hook_k`, `hook_v`, `hook_attn_out`, `mlp.hook_pre`,
/// `hook_mlp_out` or the logits) moves the next-token distributions, as [`moment`] measures it for
/// the tables, with steps of 1% of that activation's RMS; `None` for a matrix that writes no such
/// activation (the tables).
pub fn output_moment_of(
    model: &Model<'_>,
    id: TensorId,
    seqs: &[Vec<u32>],
) -> Result<Option<Vec<f64>>> {
    let cfg = model.config();
    let (kind, per_head) = match id.kind {
        TensorKind::WQ => (HookKind::Q, true),
        TensorKind::WK => (HookKind::K, true),
        TensorKind::WV => (HookKind::V, true),
        TensorKind::WO => (HookKind::AttnOut, false),
        TensorKind::WIn if cfg.gated_mlp => (HookKind::MlpPreLinear, false),
        TensorKind::WIn | TensorKind::WGate => (HookKind::MlpPre, false),
        TensorKind::WOut => (HookKind::MlpOut, false),
        TensorKind::WU => (HookKind::Logits, false),
        _ => return Ok(None),
    };
    let n = id.shape(cfg)[0];
    let seqs = &seqs[..seqs.len().min(OUTPUT_SEQUENCES)];
    let mut rms = Rms {
        kind,
        layer: id.layer,
        sum: 0.0,
        count: 0,
    };
    for tokens in seqs {
        run_with_hooks(model, tokens, &mut rms)?;
    }
    let rms = (rms.sum / rms.count.max(1) as f64).sqrt();
    let nudge = Nudge {
        kind,
        layer: id.layer,
        d_head: per_head.then_some(cfg.d_head),
        dir: 0,
        eps: (1e-2 * rms).max(1e-6) as f32,
        signs: &[],
    };
    output_moment(model, seqs, nudge, n).map(Some)
}

/// Hooks that sum the squares of activation `kind` of block `layer`.
struct Rms {
    kind: HookKind,
    layer: usize,
    sum: f64,
    count: usize,
}

impl Hooks for Rms {
    fn wants(&self, kind: HookKind) -> bool {
        kind == self.kind
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        if p.layer == self.layer {
            self.sum += act.iter().map(|v| (*v as f64).powi(2)).sum::<f64>();
            self.count += act.len();
        }
    }
}

/// Calibration sequences the output moment is measured on (each costs `2 n + 1` runs for an `n`-wide
/// activation).
pub const OUTPUT_SEQUENCES: usize = 16;

/// Hooks that add `eps * signs[pos]` to value `dir` of activation `kind` of block `layer` at every
/// position (`d_head`: the activation is hooked head by head, `dir` counting across the heads).
#[derive(Clone, Copy)]
struct Nudge<'s> {
    kind: HookKind,
    layer: usize,
    d_head: Option<usize>,
    dir: usize,
    eps: f32,
    signs: &'s [f32],
}

impl Hooks for Nudge<'_> {
    fn wants(&self, kind: HookKind) -> bool {
        kind == self.kind
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        let (head, i) = self
            .d_head
            .map_or((0, self.dir), |d| (self.dir / d, self.dir % d));
        if p.layer == self.layer && p.head == head {
            act[i] += self.eps * self.signs[p.pos];
        }
    }
}

/// `E[Jᵀ F J]`: how a change `e` of the activation `at` nudges (`n` values wide) at one position moves
/// the next-token distributions (`eᵀ H e / 2` is the KL it adds, to second order), with `J` the
/// derivative of the logits of that and every later position by the activation there and
/// `F = diag(p) - p pᵀ` the Fisher information of each softmax. `J` comes from central differences
/// (steps of `at.eps`) through the core's own forward, nudging every position at once with random
/// signs, so the cross-position terms cancel on average; measured on the first [`OUTPUT_SEQUENCES`] of
/// `seqs`.
fn output_moment(
    model: &Model<'_>,
    seqs: &[Vec<u32>],
    at: Nudge<'_>,
    n: usize,
) -> Result<Vec<f64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let seqs = &seqs[..seqs.len().min(OUTPUT_SEQUENCES)];
    // Each sequence's signs, drawn in sequence order.
    let signs: Vec<Vec<f32>> = seqs
        .iter()
        .map(|tokens| {
            (0..tokens.len())
                .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
                .collect()
        })
        .collect();
    let host = HostWeights::new(model);
    let model = &model.with_host(&host);
    let bar = ProgressBar::new(seqs.len() as u64);
    bar.set_style(ProgressStyle::with_template(
        "output Fisher {bar:30} {pos}/{len} sequences [{elapsed_precise}]",
    )?);
    // Sequences in parallel (the host's blocked weights: the same bits), each position's `Jᵀ F J`
    // computed there, then summed into `h` in sequence and position order.
    let items: Vec<(&Vec<u32>, &Vec<f32>)> = seqs.iter().zip(&signs).collect();
    let terms = par_map(&items, |&(tokens, signs)| {
        let base = run_with_hooks(model, tokens, &mut ())?;
        let d = logit_derivatives(model, tokens, at, signs, n)?;
        bar.inc(1);
        Ok(base
            .iter()
            .enumerate()
            .map(|(t, logits)| fisher(&d, t, logits))
            .collect::<Vec<_>>())
    })?;
    bar.finish_and_clear();
    let mut h = vec![0.0f64; n * n];
    let mut positions = 0usize;
    for term in terms.iter().flatten() {
        let mut s = term.iter();
        for i in 0..n {
            for j in i..n {
                let s = *s.next().unwrap_or(&0.0);
                h[i * n + j] += s;
                if i != j {
                    h[j * n + i] += s;
                }
            }
        }
        positions += 1;
    }
    let c = positions.max(1) as f64;
    Ok(h.into_iter().map(|v| v / c).collect())
}

/// `d[i][t]`: the derivative of the logits at position `t` along input `i` of `at` (nudged at every
/// position with `signs`), by central differences.
fn logit_derivatives(
    model: &Model<'_>,
    tokens: &[u32],
    at: Nudge<'_>,
    signs: &[f32],
    n: usize,
) -> Result<Vec<Vec<Vec<f64>>>> {
    let mut d = Vec::with_capacity(n);
    for dir in 0..n {
        let run = |eps| {
            run_with_hooks(
                model,
                tokens,
                &mut Nudge {
                    dir,
                    eps,
                    signs,
                    ..at
                },
            )
        };
        let (up, down) = (run(at.eps)?, run(-at.eps)?);
        let di: Vec<Vec<f64>> = up
            .iter()
            .zip(&down)
            .map(|(u, l)| {
                u.iter()
                    .zip(l)
                    .map(|(a, b)| (*a as f64 - *b as f64) / (2.0 * at.eps as f64))
                    .collect()
            })
            .collect();
        d.push(di);
    }
    Ok(d)
}

/// Position `t`'s `Jᵀ F J` (`n x n`, `n = d.len()`), its upper triangle row by row (`i <= j`),
/// `F = diag(p) - p pᵀ` with `p` the softmax of `logits`.
fn fisher(d: &[Vec<Vec<f64>>], t: usize, logits: &[f32]) -> Vec<f64> {
    let n = d.len();
    let p: Vec<f64> = crate::eval::metrics::log_softmax(logits)
        .iter()
        .map(|l| l.exp())
        .collect();
    let means: Vec<f64> = d
        .iter()
        .map(|di| di[t].iter().zip(&p).map(|(a, b)| a * b).sum())
        .collect();
    let mut out = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            let s: f64 = d[i][t]
                .iter()
                .zip(&d[j][t])
                .zip(&p)
                .map(|((a, b), p)| a * b * p)
                .sum::<f64>()
                - means[i] * means[j];
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::convert_state_dict;
    use crate::convert::fold::ProcessingOptions;
    use crate::import::random_model::{config, state_dict};
    use crate::quantize::encode::F32Encoder;
    use microlens::{Normalization, Positional};

    /// The output moment at `kind` (of the last block, unless `hook_embed`) of a random `cfg` model,
    /// checked symmetric and positive semi-definite.
    fn moment(cfg: &microlens::Config, kind: HookKind, n: usize) -> nalgebra::DMatrix<f64> {
        let opts = ProcessingOptions::default();
        let blob = convert_state_dict(state_dict(cfg, 2), cfg, &opts, &F32Encoder)
            .unwrap()
            .blob;
        let model = Model::from_bytes(&blob).unwrap();
        let seqs = crate::eval::sequences::induction_sequences(4, cfg.n_ctx, cfg.d_vocab, 1);
        let at = Nudge {
            kind,
            layer: if kind == HookKind::Embed {
                0
            } else {
                cfg.n_layers - 1
            },
            d_head: (kind != HookKind::Embed).then_some(cfg.d_head),
            dir: 0,
            eps: 1e-3,
            signs: &[],
        };
        let h = output_moment(&model, &seqs, at, n).unwrap();
        let m = nalgebra::DMatrix::from_row_slice(n, n, &h);
        assert!((&m - m.transpose()).amax() < 1e-12);
        let eig = m.clone().symmetric_eigen().eigenvalues;
        assert!(eig.iter().all(|&e| e > -1e-9 * eig.amax()), "{eig}");
        assert!(eig.amax() > 0.0);
        m
    }

    #[test]
    fn output_moment_is_symmetric_and_positive_semi_definite() {
        let cfg = config(Normalization::LN, Positional::Standard, true);
        let m = moment(&cfg, HookKind::Embed, cfg.d_model);
        // LayerNorm removes the mean: a change along (1, ..., 1) moves nothing.
        let n = cfg.d_model;
        let ones = nalgebra::DVector::from_element(n, 1.0);
        let top = m.clone().symmetric_eigen().eigenvalues.amax();
        assert!((ones.transpose() * &m * &ones)[0] < 1e-3 * top * n as f64);
        assert!(is_table(TensorKind::PosQ) && !is_table(TensorKind::WQ));
        assert_eq!(
            moment_of(TensorId::global(TensorKind::WPos)).kind,
            TensorKind::WE
        );
    }

    #[test]
    fn every_query_and_key_value_moves_the_output() {
        let cfg = config(Normalization::LN, Positional::Shortformer, false);
        for kind in [HookKind::Q, HookKind::K] {
            let m = moment(&cfg, kind, cfg.d_attn());
            assert!(m.diagonal().iter().all(|&v| v > 0.0), "{kind:?}: {m}");
        }
    }
}
