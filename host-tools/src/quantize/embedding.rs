//! The second moment GPTQ rounds the lookup tables `W_E` and `W_pos` against. Their rows are not
//! multiplied by an input but added to the residual stream, so what matters is how far a row's rounding
//! error `e` moves the model's next-token distributions: to second order `eᵀ H e / 2` in KL, with `H`
//! the output Fisher information pulled back to the residual stream ([`output_moment`]). (Weighting
//! the matrices that read the stream instead, `H = sum_W Wᵀ W / tr(Wᵀ W)`, did less well.)

use anyhow::{anyhow, Result};
use microlens::{Model, TensorKind};

use indicatif::{ProgressBar, ProgressStyle};
use microlens::{HookKind, HookPoint, Hooks};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::gptq::{Solver, DAMPING};
use super::matrix_values;
use crate::run::run_with_hooks;

/// Whether `kind` is a table whose rows are added to the residual stream.
pub fn is_residual_table(kind: TensorKind) -> bool {
    matches!(kind, TensorKind::WE | TensorKind::WPos)
}

/// The solver for the residual tables of `model` (`act_order`: see [`Solver::new`]).
pub fn solver(model: &Model<'_>, seqs: &[Vec<u32>], act_order: bool) -> Result<Solver> {
    Solver::new(
        &output_moment(model, seqs)?,
        model.config().d_model,
        DAMPING,
        act_order,
    )
}

/// Calibration sequences the output moment is measured on (each costs `2 d_model + 1` runs).
pub const OUTPUT_SEQUENCES: usize = 16;

/// Hooks that add `eps * signs[pos]` to input `dir` of the embedding (`hook_embed`) at every position.
struct Nudge<'s> {
    dir: usize,
    eps: f32,
    signs: &'s [f32],
}

impl Hooks for Nudge<'_> {
    fn wants(&self, kind: HookKind) -> bool {
        kind == HookKind::Embed
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        act[self.dir] += self.eps * self.signs[p.pos];
    }
}

/// `E[Jᵀ F J]`: how a change `e` of the residual stream at one position moves the next-token
/// distributions (`eᵀ H e / 2` is the KL it adds, to second order), with `J` the derivative of the
/// logits of that and every later position by the residual stream there and `F = diag(p) - p pᵀ` the
/// Fisher information of each softmax. `J` comes from central differences through the core's own
/// forward, nudging every position at once with random signs, so the cross-position terms cancel on
/// average; measured on the first [`OUTPUT_SEQUENCES`] of `seqs`.
pub fn output_moment(model: &Model<'_>, seqs: &[Vec<u32>]) -> Result<Vec<f64>> {
    let cfg = *model.config();
    let n = cfg.d_model;
    let w_e = model
        .matrix(microlens::TensorId::global(TensorKind::WE))
        .ok_or_else(|| anyhow!("the model has no W_E"))?;
    let values = matrix_values(&w_e);
    let rms = (values.iter().map(|v| (*v as f64).powi(2)).sum::<f64>()
        / values.len().max(1) as f64)
        .sqrt();
    let eps = (1e-2 * rms).max(1e-6) as f32;
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut h = vec![0.0f64; n * n];
    let mut positions = 0usize;
    let seqs = &seqs[..seqs.len().min(OUTPUT_SEQUENCES)];
    let bar = ProgressBar::new(seqs.len() as u64);
    bar.set_style(ProgressStyle::with_template(
        "output Fisher {bar:30} {pos}/{len} sequences [{elapsed_precise}]",
    )?);
    for tokens in seqs {
        let signs: Vec<f32> = (0..tokens.len())
            .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
            .collect();
        let base = run_with_hooks(model, tokens, &mut ())?;
        // d[i][t]: derivative of the logits at position t along input i.
        let mut d = Vec::with_capacity(n);
        for dir in 0..n {
            let run = |eps| {
                run_with_hooks(
                    model,
                    tokens,
                    &mut Nudge {
                        dir,
                        eps,
                        signs: &signs,
                    },
                )
            };
            let (up, down) = (run(eps)?, run(-eps)?);
            let di: Vec<Vec<f64>> = up
                .iter()
                .zip(&down)
                .map(|(u, l)| {
                    u.iter()
                        .zip(l)
                        .map(|(a, b)| (*a as f64 - *b as f64) / (2.0 * eps as f64))
                        .collect()
                })
                .collect();
            d.push(di);
        }
        for (t, logits) in base.iter().enumerate() {
            let p: Vec<f64> = crate::fidelity::log_softmax(logits)
                .iter()
                .map(|l| l.exp())
                .collect();
            let means: Vec<f64> = d
                .iter()
                .map(|di| di[t].iter().zip(&p).map(|(a, b)| a * b).sum())
                .collect();
            for i in 0..n {
                for j in i..n {
                    let s: f64 = d[i][t]
                        .iter()
                        .zip(&d[j][t])
                        .zip(&p)
                        .map(|((a, b), p)| a * b * p)
                        .sum::<f64>()
                        - means[i] * means[j];
                    h[i * n + j] += s;
                    if i != j {
                        h[j * n + i] += s;
                    }
                }
            }
            positions += 1;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let c = positions.max(1) as f64;
    Ok(h.into_iter().map(|v| v / c).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::convert_state_dict;
    use crate::encode::F32Encoder;
    use crate::fold::ProcessingOptions;
    use crate::tests::random_model::{config, state_dict};
    use microlens::{Normalization, Positional};

    #[test]
    fn output_moment_is_symmetric_and_positive_semi_definite() {
        let cfg = config(Normalization::LN, Positional::Standard, true);
        let opts = ProcessingOptions::default();
        let blob = convert_state_dict(state_dict(&cfg, 2), &cfg, &opts, &F32Encoder)
            .unwrap()
            .blob;
        let model = Model::from_bytes(&blob).unwrap();
        let seqs = crate::fidelity::induction_sequences(4, cfg.n_ctx, cfg.d_vocab, 1);
        let h = output_moment(&model, &seqs).unwrap();
        let n = model.config().d_model;
        let m = nalgebra::DMatrix::from_row_slice(n, n, &h);
        assert!((&m - m.transpose()).amax() < 1e-12);
        let eig = m.clone().symmetric_eigen().eigenvalues;
        assert!(eig.iter().all(|&e| e > -1e-9 * eig.amax()), "{eig}");
        assert!(eig.amax() > 0.0);
        // LayerNorm removes the mean: a change along (1, ..., 1) moves nothing.
        let ones = nalgebra::DVector::from_element(n, 1.0);
        assert!((ones.transpose() * &m * &ones)[0] < 1e-3 * eig.amax() * n as f64);
        assert!(is_residual_table(TensorKind::WPos) && !is_residual_table(TensorKind::PosQ));
    }
}
