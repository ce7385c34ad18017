//! Fidelity of a candidate model (typically quantised) to a reference on the same token sequences, both
//! run through the core's own `Session`: whole-model next-token metrics, and per head the attention
//! patterns, previous-token and induction scores, copying scores and composition scores, so a change of
//! circuit shows up by name.

mod heads;
mod report;

pub use heads::{detection_score, HeadFidelity, PatternStats, PatternTerms, Patterns};
pub use report::{CompositionChange, ModelFidelity, Report};

use anyhow::{ensure, Result};
use microlens::host::HostWeights;
use microlens::{Config, Hooks, Model};
use rayon::prelude::*;

use crate::analysis::{
    all_composition_scores, full_ov_copying_score, CircuitWeights, CompositionMode,
};
use crate::eval::metrics::{argmax, kl, log_softmax, top2};
use crate::eval::run::{run_model, run_model_with, RunOutput};
use crate::eval::sequences::repeated_positions;

/// Running sums of the whole-model metrics.
#[derive(Clone, Debug, Default)]
struct LogitStats {
    positions: usize,
    kl_sum: f64,
    kl_max: f64,
    same_top1: usize,
    flip_max_margin: f64,
    sq_err: f64,
    values: usize,
    loss: [f64; 2],
    loss_positions: usize,
    same_top1_repeated: usize,
    /// Sum over every position of the squared change of the reference's top-1 margin.
    margin_moved_sq: f64,
    /// `(reference margin, same top-1)` of every repeated position.
    repeated_margins: Vec<(f64, bool)>,
}

/// Margins below this many [`ModelFidelity::top1_margin_noise`] are near-ties: a Gaussian change of
/// that RMS crosses a margin of 3 of it at 0.13% of positions.
pub const NEAR_TIE_NOISES: f64 = 3.0;

/// What one position adds to [`LogitStats`], computed where its sequence runs.
#[derive(Clone, Debug)]
struct PositionTerms {
    kl: f64,
    same_top1: bool,
    /// The reference's top-1 margin where the top-1 flips.
    flip_margin: Option<f64>,
    /// The reference's top-1 margin.
    margin: f64,
    /// How far the candidate moves the reference's first-minus-second logit difference.
    margin_moved: f64,
    sq_err: f64,
    values: usize,
    /// `-log p` of the next token (reference, candidate) at a repeated position.
    loss: Option<[f64; 2]>,
}

impl LogitStats {
    /// Every position's terms of one sequence.
    fn terms(tokens: &[u32], reference: &[Vec<f32>], candidate: &[Vec<f32>]) -> Vec<PositionTerms> {
        let repeated = repeated_positions(tokens);
        reference
            .iter()
            .zip(candidate)
            .enumerate()
            .map(|(t, (r, c))| {
                let (lr, lc) = (log_softmax(r), log_softmax(c));
                let same_top1 = argmax(r) == argmax(c);
                let (margin, margin_moved) = match top2(r) {
                    (best, Some(second)) => {
                        let m = r[best] as f64 - r[second] as f64;
                        (m, c[best] as f64 - c[second] as f64 - m)
                    }
                    _ => (0.0, 0.0),
                };
                let loss = repeated.binary_search(&t).is_ok().then(|| {
                    let next = tokens[t + 1] as usize;
                    let log_p = |l: &[f64]| l.get(next).copied().unwrap_or(f64::NEG_INFINITY);
                    [log_p(&lr), log_p(&lc)]
                });
                PositionTerms {
                    kl: kl(&lr, &lc),
                    same_top1,
                    flip_margin: (!same_top1).then_some(margin),
                    margin,
                    margin_moved,
                    sq_err: r
                        .iter()
                        .zip(c)
                        .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
                        .sum::<f64>(),
                    values: r.len(),
                    loss,
                }
            })
            .collect()
    }

    /// Adds one sequence's terms, position by position.
    fn add_terms(&mut self, terms: &[PositionTerms]) {
        for p in terms {
            self.kl_sum += p.kl;
            self.kl_max = self.kl_max.max(p.kl);
            self.same_top1 += p.same_top1 as usize;
            if let Some(m) = p.flip_margin {
                self.flip_max_margin = self.flip_max_margin.max(m);
            }
            self.sq_err += p.sq_err;
            self.values += p.values;
            self.positions += 1;
            self.margin_moved_sq += p.margin_moved * p.margin_moved;
            if let Some([r, c]) = p.loss {
                self.loss[0] -= r;
                self.loss[1] -= c;
                self.loss_positions += 1;
                self.same_top1_repeated += p.same_top1 as usize;
                self.repeated_margins.push((p.margin, p.same_top1));
            }
        }
    }

    #[cfg(test)]
    fn add(&mut self, tokens: &[u32], reference: &[Vec<f32>], candidate: &[Vec<f32>]) {
        self.add_terms(&Self::terms(tokens, reference, candidate));
    }

    fn finish(&self) -> ModelFidelity {
        let n = self.positions.max(1) as f64;
        let nl = self.loss_positions.max(1) as f64;
        let noise = (self.margin_moved_sq / n).sqrt();
        let decisive = self
            .repeated_margins
            .iter()
            .filter(|(m, _)| *m > NEAR_TIE_NOISES * noise);
        let (decisive, same) = decisive.fold((0usize, 0usize), |(n, s), (_, same)| {
            (n + 1, s + *same as usize)
        });
        ModelFidelity {
            positions: self.positions,
            mean_kl: self.kl_sum / n,
            max_kl: self.kl_max,
            top1_agreement: self.same_top1 as f64 / n,
            top1_flip_max_margin: self.flip_max_margin,
            logit_rmse: (self.sq_err / self.values.max(1) as f64).sqrt(),
            repeated_positions: self.loss_positions,
            top1_agreement_repeated: self.same_top1_repeated as f64 / nl,
            top1_margin_noise: noise,
            repeated_decisive_positions: decisive,
            top1_agreement_repeated_decisive: same as f64 / decisive.max(1) as f64,
            loss_repeated_ref: self.loss[0] / nl,
            loss_repeated_cand: self.loss[1] / nl,
        }
    }
}

/// Refuses to compare models of different shapes.
fn check_same_shape(a: &Config, b: &Config) -> Result<()> {
    let shape = |c: &Config| {
        (
            c.n_layers,
            c.n_heads,
            c.d_head,
            c.d_model,
            c.d_vocab,
            c.d_vocab_out,
            c.n_ctx,
        )
    };
    ensure!(
        shape(a) == shape(b),
        "the models differ in shape (n_layers, n_heads, d_head, d_model, d_vocab, d_vocab_out, n_ctx): {:?} vs {:?}",
        shape(a),
        shape(b)
    );
    Ok(())
}

/// Weight-only per-head figures: copying scores and the largest composition change of every head, and
/// the composition changes per mode.
fn weight_metrics(
    reference: &Model<'_>,
    candidate: &Model<'_>,
    heads: &mut [HeadFidelity],
) -> Result<Vec<CompositionChange>> {
    let (wr, wc) = (
        CircuitWeights::from_model(reference)?,
        CircuitWeights::from_model(candidate)?,
    );
    let square = reference.config().d_vocab == reference.config().d_vocab_out;
    for h in heads.iter_mut() {
        let head = microlens::analysis::Head::new(h.layer, h.head);
        if square {
            h.copying_score_ref = Some(full_ov_copying_score(&wr.w_e, wr.head(head), &wr.w_u));
            h.copying_score_cand = Some(full_ov_copying_score(&wc.w_e, wc.head(head), &wc.w_u));
        }
    }
    let n = heads.len();
    let mut changes = Vec::new();
    for mode in CompositionMode::ALL {
        let (a, b) = (
            all_composition_scores(&wr, mode).values,
            all_composition_scores(&wc, mode).values,
        );
        let diff: Vec<f64> = a.iter().zip(&b).map(|(x, y)| y - x).collect();
        for (i, d) in diff.iter().enumerate() {
            let (from, to) = (i / n, i % n);
            for h in [from, to] {
                heads[h].composition_max_abs_change =
                    heads[h].composition_max_abs_change.max(d.abs());
            }
        }
        changes.push(CompositionChange::new(mode, a, b));
    }
    Ok(changes)
}

/// Compares `candidate` with `reference` on `seqs` (each at most `n_ctx` long), calling `progress` after
/// each sequence.
pub fn compare(
    reference: &Model<'_>,
    candidate: &Model<'_>,
    seqs: &[Vec<u32>],
    progress: impl FnMut(),
) -> Result<Report> {
    compare_with(reference, candidate, &mut (), seqs, progress)
}

/// [`compare`] with `candidate` run under `hooks` (e.g. [`crate::eval::emulation::Int8Emulation`]),
/// cloned per sequence.
pub fn compare_with<H: Hooks + Clone + Send + Sync>(
    reference: &Model<'_>,
    candidate: &Model<'_>,
    hooks: &mut H,
    seqs: &[Vec<u32>],
    mut progress: impl FnMut(),
) -> Result<Report> {
    let (_, mut logits, mut patterns) = start(reference, candidate)?;
    // The host's blocked weights (the same bits), sequences in parallel chunk by chunk, each with its
    // own copy of `hooks` (they keep no state across sequences) and its metric terms computed where it
    // runs; the terms are summed in sequence order: the report does not depend on the thread count.
    let (wr, wc) = (HostWeights::new(reference), HostWeights::new(candidate));
    let (fast_r, fast_c) = (reference.with_host(&wr), candidate.with_host(&wc));
    let proto = &*hooks;
    for chunk in seqs.chunks(PARALLEL_CHUNK) {
        let runs: Vec<Result<_>> = chunk
            .par_iter()
            .map(|tokens| {
                let mut hooks = proto.clone();
                let (r, c) = (
                    run_model(&fast_r, tokens)?,
                    run_model_with(&fast_c, tokens, &mut hooks)?,
                );
                Ok((
                    LogitStats::terms(tokens, &r.logits, &c.logits),
                    patterns.terms(tokens, &r.patterns, &c.patterns),
                ))
            })
            .collect();
        for run in runs {
            let (l, p) = run?;
            logits.add_terms(&l);
            patterns.add_terms(&p);
            progress();
        }
    }
    finish(reference, candidate, seqs, logits, patterns)
}

/// [`compare`] with each sequence's candidate run (logits and patterns) made by `run_candidate`, e.g.
/// a device over its serial link; `candidate` is its blob (for the weight figures). Sequence by
/// sequence, summed as [`compare_with`] sums them: the same report for the same runs.
pub fn compare_runs(
    reference: &Model<'_>,
    candidate: &Model<'_>,
    seqs: &[Vec<u32>],
    mut run_candidate: impl FnMut(&[u32]) -> Result<RunOutput>,
    mut progress: impl FnMut(),
) -> Result<Report> {
    let (cfg, mut logits, mut patterns) = start(reference, candidate)?;
    let wr = HostWeights::new(reference);
    let fast_r = reference.with_host(&wr);
    for tokens in seqs {
        let (r, c) = (run_model(&fast_r, tokens)?, run_candidate(tokens)?);
        ensure!(
            c.logits.len() == tokens.len() && c.patterns.len() == cfg.n_layers,
            "the candidate's run has {} positions and {} layers of patterns",
            c.logits.len(),
            c.patterns.len()
        );
        logits.add_terms(&LogitStats::terms(tokens, &r.logits, &c.logits));
        let p = patterns.terms(tokens, &r.patterns, &c.patterns);
        patterns.add_terms(&p);
        progress();
    }
    finish(reference, candidate, seqs, logits, patterns)
}

/// The reference's config and empty sums, once the two models are known to have one shape.
fn start(
    reference: &Model<'_>,
    candidate: &Model<'_>,
) -> Result<(Config, LogitStats, PatternStats)> {
    let cfg = *reference.config();
    check_same_shape(&cfg, candidate.config())?;
    let patterns = PatternStats::new(cfg.n_layers, cfg.n_heads);
    Ok((cfg, LogitStats::default(), patterns))
}

/// The report from the summed figures and the weights.
fn finish(
    reference: &Model<'_>,
    candidate: &Model<'_>,
    seqs: &[Vec<u32>],
    logits: LogitStats,
    patterns: PatternStats,
) -> Result<Report> {
    let mut heads = patterns.finish();
    let composition = weight_metrics(reference, candidate, &mut heads)?;
    Ok(Report::new(seqs, logits.finish(), heads, composition))
}

/// Sequences run in parallel before their results are summed in order (bounds the memory held).
const PARALLEL_CHUNK: usize = 256;

/// Records on a candidate's [`describe`] which steps its run emulated (`fidelity --json`'s
/// `emulated_int8` and `emulated_integer`: the rounding names and the integer steps, empty for none).
pub fn mark_emulated(candidate: &mut serde_json::Value, int8: &[&str], integer: &[&str]) {
    candidate["emulated_int8"] = serde_json::json!(int8);
    candidate["emulated_integer"] = serde_json::json!(integer);
}

/// A blob as `fidelity --json` describes it: `path` (`label`), the dtypes of its matrices, its
/// activation arithmetic and its size in bytes.
pub fn describe(label: &str, model: &Model<'_>) -> serde_json::Value {
    let mut dtypes: Vec<&str> = model
        .entries()
        .filter(|e| e.kind.is_matrix())
        .map(|e| e.dtype.name())
        .collect();
    dtypes.sort_unstable();
    dtypes.dedup();
    serde_json::json!({
        "path": label,
        "dtypes": dtypes,
        "activations": model.activations().name(),
        "bytes": model.blob_len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_are_reported_with_the_reference_margin() {
        let mut stats = LogitStats::default();
        let reference = [
            vec![1.0, 0.9, 0.0],
            vec![2.0, 0.0, 0.5],
            vec![0.0, 3.0, 2.0],
        ];
        let candidate = [
            vec![0.9, 1.0, 0.0],
            vec![2.0, 0.0, 0.5],
            vec![0.0, 1.9, 2.0],
        ];
        stats.add(&[0, 1, 2, 3], &reference, &candidate);
        let m = stats.finish();
        assert!((m.top1_agreement - 1.0 / 3.0).abs() < 1e-12);
        assert!((m.top1_flip_max_margin - 1.0).abs() < 1e-6, "{m:?}");
        let mut same = LogitStats::default();
        same.add(&[0, 1, 2, 3], &reference, &reference);
        assert_eq!(same.finish().top1_flip_max_margin, 0.0);
    }

    #[test]
    fn near_ties_within_the_margin_noise_are_set_apart() {
        // Tokens 5 6 7 5 6 7 5: positions 3, 4 and 5 are repeated.
        let tokens = [5, 6, 7, 5, 6, 7, 5];
        let (mut reference, mut candidate) = (Vec::new(), Vec::new());
        for t in 0..tokens.len() {
            // Every margin moves by 0.01; position 4 is a near-tie (margin 0.005) that flips.
            let margin = if t == 4 { 0.005 } else { 1.0 };
            reference.push(vec![margin, 0.0, -1.0]);
            candidate.push(vec![margin - 0.01, 0.0, -1.0]);
        }
        let mut stats = LogitStats::default();
        stats.add(&tokens, &reference, &candidate);
        let m = stats.finish();
        assert_eq!(m.repeated_positions, 3);
        assert!((m.top1_agreement_repeated - 2.0 / 3.0).abs() < 1e-12);
        assert!((m.top1_margin_noise - 0.01).abs() < 1e-6, "{m:?}");
        assert_eq!(m.repeated_decisive_positions, 2);
        assert_eq!(m.top1_agreement_repeated_decisive, 1.0);
    }
}
