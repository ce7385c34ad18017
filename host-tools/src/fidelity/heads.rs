//! Per-head attention metrics of two models over the same sequences: how far their patterns are apart,
//! and the previous-token and induction scores of each (TransformerLens's `detect_head`, "mul": the
//! attention on the detection pattern over all attention, averaged over sequences).

use microlens::analysis::{Head, HeadDetector, HeadPattern, Ratio};
use microlens::{HookKind, HookPoint, Hooks};
use serde::Serialize;

use crate::eval::metrics::js;

/// `[layer][head][query][key]` attention patterns of one sequence.
pub type Patterns = Vec<Vec<Vec<Vec<f32>>>>;

/// One head's figures over all sequences.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HeadFidelity {
    /// Block.
    pub layer: usize,
    /// Head.
    pub head: usize,
    /// Largest `|A_ref - A_cand|` over every sequence, query and key.
    pub pattern_max_abs_diff: f64,
    /// Mean Jensen-Shannon divergence (nats) of the attention rows.
    pub pattern_mean_js: f64,
    /// Induction score of the reference.
    pub induction_score_ref: f64,
    /// Induction score of the candidate.
    pub induction_score_cand: f64,
    /// Previous-token score of the reference.
    pub prev_token_score_ref: f64,
    /// Previous-token score of the candidate.
    pub prev_token_score_cand: f64,
    /// Full-OV-circuit copying score of the reference (`None` when `d_vocab != d_vocab_out`).
    pub copying_score_ref: Option<f64>,
    /// Full-OV-circuit copying score of the candidate.
    pub copying_score_cand: Option<f64>,
    /// Largest change of a Q, K or V composition score this head takes part in (as writer or reader).
    pub composition_max_abs_change: f64,
}

impl HeadFidelity {
    /// `|induction_ref - induction_cand|`.
    pub fn induction_change(&self) -> f64 {
        (self.induction_score_ref - self.induction_score_cand).abs()
    }
    /// `|prev_token_ref - prev_token_cand|`.
    pub fn prev_token_change(&self) -> f64 {
        (self.prev_token_score_ref - self.prev_token_score_cand).abs()
    }
    /// `|copying_ref - copying_cand|` (0 if undefined).
    pub fn copying_change(&self) -> f64 {
        match (self.copying_score_ref, self.copying_score_cand) {
            (Some(a), Some(b)) => (a - b).abs(),
            _ => 0.0,
        }
    }
}

/// The score of one head's pattern on one sequence, `a[query][key]`: attention on `pattern`'s targets
/// over all attention (TransformerLens's "mul"), computed by the core's [`HeadDetector`] fed the rows.
pub fn detection_score(pattern: HeadPattern, tokens: &[u32], a: &[Vec<f32>]) -> f64 {
    let mut acc = [Ratio::default()];
    let mut detector = HeadDetector::new(pattern, tokens, &mut acc, 1);
    for (pos, row) in a.iter().enumerate().take(tokens.len()) {
        let point = HookPoint {
            kind: HookKind::Pattern,
            layer: 0,
            head: 0,
            pos,
        };
        detector.hook(point, &mut row[..row.len().min(pos + 1)].to_vec());
    }
    f64::from(detector.score(Head::new(0, 0)))
}

/// What one sequence adds to one head's sums.
#[derive(Clone, Debug)]
struct HeadTerms {
    max_abs_diff: f64,
    /// Jensen-Shannon divergence of each attention row.
    js_rows: Vec<f64>,
    /// Induction (reference, candidate) and previous-token (reference, candidate) scores.
    scores: [f64; 4],
}

/// What one sequence adds to [`PatternStats`].
#[derive(Clone, Debug)]
pub struct PatternTerms {
    rows: usize,
    heads: Vec<HeadTerms>,
}

/// Running sums of the pattern metrics of every head, `[layer * n_heads + head]`.
#[derive(Clone, Debug)]
pub struct PatternStats {
    n_heads: usize,
    heads: Vec<HeadFidelity>,
    rows: usize,
    sequences: usize,
}

impl PatternStats {
    /// Empty sums for `n_layers x n_heads` heads.
    pub fn new(n_layers: usize, n_heads: usize) -> Self {
        let heads = (0..n_layers * n_heads)
            .map(|i| HeadFidelity {
                layer: i / n_heads,
                head: i % n_heads,
                ..HeadFidelity::default()
            })
            .collect();
        PatternStats {
            n_heads,
            heads,
            rows: 0,
            sequences: 0,
        }
    }

    /// Adds one sequence's patterns of both models.
    pub fn add(&mut self, tokens: &[u32], reference: &Patterns, candidate: &Patterns) {
        let terms = self.terms(tokens, reference, candidate);
        self.add_terms(&terms);
    }

    /// What one sequence's patterns of both models add, every head's (computed where the sequence
    /// runs; [`PatternStats::add_terms`] sums them).
    pub fn terms(
        &self,
        tokens: &[u32],
        reference: &Patterns,
        candidate: &Patterns,
    ) -> PatternTerms {
        let n = tokens.len();
        let heads = self
            .heads
            .iter()
            .map(|h| {
                let (a, b) = (&reference[h.layer][h.head], &candidate[h.layer][h.head]);
                let mut max_abs_diff = 0.0f64;
                let mut js_rows = Vec::with_capacity(n);
                for (ra, rb) in a.iter().zip(b).take(n) {
                    let d = ra
                        .iter()
                        .zip(rb)
                        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs() as f64));
                    max_abs_diff = max_abs_diff.max(d);
                    js_rows.push(js(ra, rb));
                }
                HeadTerms {
                    max_abs_diff,
                    js_rows,
                    scores: [
                        detection_score(HeadPattern::Induction, tokens, a),
                        detection_score(HeadPattern::Induction, tokens, b),
                        detection_score(HeadPattern::PreviousToken, tokens, a),
                        detection_score(HeadPattern::PreviousToken, tokens, b),
                    ],
                }
            })
            .collect();
        PatternTerms { rows: n, heads }
    }

    /// Adds one sequence's [`PatternStats::terms`].
    pub fn add_terms(&mut self, terms: &PatternTerms) {
        for (h, t) in self.heads.iter_mut().zip(&terms.heads) {
            h.pattern_max_abs_diff = h.pattern_max_abs_diff.max(t.max_abs_diff);
            for js in &t.js_rows {
                h.pattern_mean_js += js;
            }
            let [ind_ref, ind_cand, prev_ref, prev_cand] = t.scores;
            h.induction_score_ref += ind_ref;
            h.induction_score_cand += ind_cand;
            h.prev_token_score_ref += prev_ref;
            h.prev_token_score_cand += prev_cand;
        }
        self.rows += terms.rows;
        self.sequences += 1;
    }

    /// The means: JS per attention row, scores per sequence.
    pub fn finish(mut self) -> Vec<HeadFidelity> {
        let (rows, seqs) = (self.rows.max(1) as f64, self.sequences.max(1) as f64);
        for h in &mut self.heads {
            h.pattern_mean_js /= rows;
            for s in [
                &mut h.induction_score_ref,
                &mut h.induction_score_cand,
                &mut h.prev_token_score_ref,
                &mut h.prev_token_score_cand,
            ] {
                *s /= seqs;
            }
        }
        self.heads
    }

    /// Heads per layer.
    pub fn n_heads(&self) -> usize {
        self.n_heads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_scores_follow_transformer_lens() {
        let tokens = [4, 5, 4, 5];
        // A perfect induction head: query 2 (token 4) looks at key 1, query 3 at key 2; rows 0 and 1 at
        // themselves.
        let a = vec![
            vec![1.0],
            vec![0.0, 1.0],
            vec![0.0, 1.0, 0.0],
            vec![0.0, 0.0, 1.0, 0.0],
        ];
        assert_eq!(detection_score(HeadPattern::Induction, &tokens, &a), 0.5);
        assert_eq!(
            detection_score(HeadPattern::PreviousToken, &tokens, &a),
            0.5
        );
    }

    #[test]
    fn identical_patterns_have_no_distance() {
        let tokens = [1, 2, 1];
        let p: Patterns = vec![vec![vec![
            vec![1.0, 0.0, 0.0],
            vec![0.5, 0.5, 0.0],
            vec![0.2, 0.3, 0.5],
        ]]];
        let mut s = PatternStats::new(1, 1);
        s.add(&tokens, &p, &p);
        let h = &s.finish()[0];
        assert_eq!((h.pattern_max_abs_diff, h.pattern_mean_js), (0.0, 0.0));
        assert_eq!(h.induction_score_ref, h.induction_score_cand);
        assert!((h.prev_token_score_ref - (0.5 + 0.3) / 3.0).abs() < 1e-7);
    }
}
