//! What `fidelity` reports: the whole-model figures, one row per head, the composition changes, and the
//! head whose attention changed most; as JSON or as a compact table.

use serde::Serialize;

use super::heads::HeadFidelity;
use crate::analysis::CompositionMode;

/// Whole-model next-token figures over every position of every sequence.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelFidelity {
    /// Positions compared.
    pub positions: usize,
    /// Mean `KL(reference || candidate)` of the next-token distributions, nats.
    pub mean_kl: f64,
    /// Largest KL at any position, nats.
    pub max_kl: f64,
    /// Fraction of positions where both models rank the same token first.
    pub top1_agreement: f64,
    /// Largest lead of the reference's first logit over its second at a position where the candidate
    /// ranks another token first (`0` when none does): every flip happened at a reference margin at
    /// most this large.
    pub top1_flip_max_margin: f64,
    /// Root mean square of the logit differences.
    pub logit_rmse: f64,
    /// Positions in the repeated part (their next token repeats an earlier bigram).
    pub repeated_positions: usize,
    /// Top-1 agreement on the repeated part alone, where the models predict rather than guess.
    pub top1_agreement_repeated: f64,
    /// The candidate's noise on the top-1 margin: the root mean square, over every position, of how
    /// much it moves the reference's first logit minus its second.
    pub top1_margin_noise: f64,
    /// Repeated positions whose reference margin exceeds [`super::NEAR_TIE_NOISES`] times
    /// `top1_margin_noise` (not near-ties).
    pub repeated_decisive_positions: usize,
    /// Top-1 agreement on those positions: the repeated part without the near-ties the candidate's own
    /// noise flips.
    pub top1_agreement_repeated_decisive: f64,
    /// Mean next-token loss of the reference on the repeated part, nats.
    pub loss_repeated_ref: f64,
    /// Mean next-token loss of the candidate on the repeated part, nats.
    pub loss_repeated_cand: f64,
}

/// How one mode's composition scores moved.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompositionChange {
    /// `"Q"`, `"K"` or `"V"`.
    pub mode: &'static str,
    /// Largest `|cand - ref|` over all head pairs.
    pub max_abs_change: f64,
    /// Reference scores, `[from_layer][from_head][to_layer][to_head]` flattened.
    pub reference: Vec<f64>,
    /// Candidate scores, same order.
    pub candidate: Vec<f64>,
}

impl CompositionChange {
    /// The change of `mode` from `reference` to `candidate` scores.
    pub fn new(mode: CompositionMode, reference: Vec<f64>, candidate: Vec<f64>) -> Self {
        let max_abs_change = reference
            .iter()
            .zip(&candidate)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        CompositionChange {
            mode: mode.name(),
            max_abs_change,
            reference,
            candidate,
        }
    }
}

/// The head whose attention moved most (largest mean JS of its rows, then largest max difference).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MostChanged {
    /// Block.
    pub layer: usize,
    /// Head.
    pub head: usize,
    /// Its mean JS divergence.
    pub pattern_mean_js: f64,
    /// Its largest attention difference.
    pub pattern_max_abs_diff: f64,
    /// Its induction score change.
    pub induction_score_change: f64,
}

/// Everything `fidelity` measures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Sequences compared.
    pub sequences: usize,
    /// Whole-model figures (flattened into the top level of the JSON).
    #[serde(flatten)]
    pub model: ModelFidelity,
    /// Largest `pattern_max_abs_diff` of any head.
    pub pattern_max_abs_diff: f64,
    /// Largest induction score change of any head.
    pub induction_score_max_change: f64,
    /// One entry per head, layer by layer.
    pub heads: Vec<HeadFidelity>,
    /// The head whose attention changed most.
    pub most_changed_head: Option<MostChanged>,
    /// Q, K and V composition changes.
    pub composition: Vec<CompositionChange>,
}

impl Report {
    /// Assembles a report.
    pub fn new(
        seqs: &[Vec<u32>],
        model: ModelFidelity,
        heads: Vec<HeadFidelity>,
        composition: Vec<CompositionChange>,
    ) -> Self {
        let most = heads.iter().max_by(|a, b| {
            a.pattern_mean_js
                .total_cmp(&b.pattern_mean_js)
                .then(a.pattern_max_abs_diff.total_cmp(&b.pattern_max_abs_diff))
        });
        let most_changed_head = most.map(|h| MostChanged {
            layer: h.layer,
            head: h.head,
            pattern_mean_js: h.pattern_mean_js,
            pattern_max_abs_diff: h.pattern_max_abs_diff,
            induction_score_change: h.induction_change(),
        });
        Report {
            sequences: seqs.len(),
            model,
            pattern_max_abs_diff: heads
                .iter()
                .map(|h| h.pattern_max_abs_diff)
                .fold(0.0, f64::max),
            induction_score_max_change: heads
                .iter()
                .map(HeadFidelity::induction_change)
                .fold(0.0, f64::max),
            heads,
            most_changed_head,
            composition,
        }
    }
}
