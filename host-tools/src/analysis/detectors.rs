//! Head detectors on generated repeated random sequences: previous-token, duplicate-token and induction
//! scores of every head, TransformerLens's `detect_head(..., error_measure="mul")` averaged over
//! sequences, computed with the core's [`HeadDetector`] hooks.

use anyhow::Result;
use microlens::analysis::{Head, HeadDetector, HeadPattern, Ratio};
use microlens::Model;

use crate::eval::run::{par_map, run_with_hooks};

/// The three detector scores of every head.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadScores {
    /// Heads per layer.
    pub n_heads: usize,
    /// `[layer][head]` previous-token scores.
    pub previous_token: Vec<f64>,
    /// `[layer][head]` duplicate-token scores.
    pub duplicate_token: Vec<f64>,
    /// `[layer][head]` induction scores.
    pub induction: Vec<f64>,
    /// `[layer][head]` induction scores over the query rows that have an induction target only (the
    /// repeated half): the mean attention on the induction stripe, Olsson et al.'s score.
    pub induction_repeated: Vec<f64>,
}

impl HeadScores {
    /// The scores of `pattern`, `[layer][head]`.
    pub fn of(&self, pattern: HeadPattern) -> &[f64] {
        match pattern {
            HeadPattern::PreviousToken => &self.previous_token,
            HeadPattern::DuplicateToken => &self.duplicate_token,
            HeadPattern::Induction => &self.induction,
        }
    }

    /// The score of `head` for `pattern`.
    pub fn get(&self, pattern: HeadPattern, head: Head) -> f64 {
        self.of(pattern)[head.index(self.n_heads)]
    }
}

/// Mean over `seqs` of each head's score for each [`HeadPattern`], and of the induction score over
/// the rows with targets (one run per sequence).
pub fn head_scores(model: &Model<'_>, seqs: &[Vec<u32>]) -> Result<HeadScores> {
    let cfg = model.config();
    let n = cfg.n_layers * cfg.n_heads;
    // Sequences in parallel, their scores summed in sequence order.
    let per_sequence = par_map(seqs, |tokens| {
        let mut acc: [Vec<Ratio>; 4] = std::array::from_fn(|_| vec![Ratio::default(); n]);
        let [a0, a1, a2, a3] = &mut acc;
        let [p0, p1, p2] = HeadPattern::ALL;
        let mut detectors = (
            HeadDetector::new(p0, tokens, a0, cfg.n_heads),
            (
                HeadDetector::new(p1, tokens, a1, cfg.n_heads),
                (
                    HeadDetector::new(p2, tokens, a2, cfg.n_heads),
                    HeadDetector::new(p2, tokens, a3, cfg.n_heads).targeted_rows_only(true),
                ),
            ),
        );
        run_with_hooks(model, tokens, &mut detectors)?;
        Ok(acc.map(|a| a.iter().map(|r| r.value() as f64).collect::<Vec<f64>>()))
    })?;
    let mut sums: [Vec<f64>; 4] = std::array::from_fn(|_| vec![0.0; n]);
    for acc in &per_sequence {
        for (sum, acc) in sums.iter_mut().zip(acc) {
            sum.iter_mut().zip(acc).for_each(|(s, v)| *s += v);
        }
    }
    let count = seqs.len().max(1) as f64;
    let [previous_token, duplicate_token, induction, induction_repeated] =
        sums.map(|s| s.into_iter().map(|x| x / count).collect());
    Ok(HeadScores {
        n_heads: cfg.n_heads,
        previous_token,
        duplicate_token,
        induction,
        induction_repeated,
    })
}
