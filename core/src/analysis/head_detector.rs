//! Head detection scores, accumulated query row by query row as the sequence runs.
//!
//! TransformerLens's `detect_head(..., error_measure="mul")`: for one sequence and head, with pattern `A`
//! (`[query][key]`) and detection pattern `D`, `score = sum(A ⊙ D) / sum(A)` over the whole lower
//! triangle. Every row of `A` sums to 1, so this is the mean over **all** query rows (including rows
//! where `D` is empty, e.g. row 0, or first occurrences for the duplicate and induction patterns) of the
//! attention the row pays to its targets. `exclude_bos` zeroes `A[:, 0]` and `exclude_current_token`
//! zeroes the diagonal, in both sums, as TransformerLens does. For several sequences TransformerLens
//! averages the per-sequence scores: run one detector per sequence and average [`HeadDetector::score`].
//!
//! [`HeadDetector::targeted_rows_only`] counts only the query rows where `D` has a target. On repeated
//! random tokens that is the repeated half, and the induction score becomes the mean attention on the
//! induction stripe there, the score of Olsson et al. ("In-context learning and induction heads") and of
//! the TransformerLens tutorials; "mul" over all rows cannot exceed the fraction of rows with targets
//! (about 1/2 on a sequence repeated once).

use super::detection::HeadPattern;
use super::head::Head;
use crate::hooks::{HookKind, HookPoint, Hooks};

/// `num / den`, accumulated.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ratio {
    /// Numerator: attention on the detection pattern.
    pub num: f32,
    /// Denominator: all attention counted.
    pub den: f32,
}

impl Ratio {
    /// `num / den`, or 0 when nothing was counted.
    pub fn value(self) -> f32 {
        if self.den == 0.0 {
            0.0
        } else {
            self.num / self.den
        }
    }
}

/// Accumulates the [`HeadPattern`] score of every head over `tokens`, the sequence being run from
/// position 0 (positions past `tokens` are ignored).
#[derive(Debug)]
pub struct HeadDetector<'a> {
    pattern: HeadPattern,
    tokens: &'a [u32],
    acc: &'a mut [Ratio],
    n_heads: usize,
    exclude_bos: bool,
    exclude_current_token: bool,
    targeted_rows_only: bool,
}

impl<'a> HeadDetector<'a> {
    /// A detector of `pattern` over `tokens` for `n_heads` heads per layer, accumulating into `acc`
    /// (`[n_layers][n_heads]`, zeroed here).
    pub fn new(
        pattern: HeadPattern,
        tokens: &'a [u32],
        acc: &'a mut [Ratio],
        n_heads: usize,
    ) -> Self {
        acc.fill(Ratio::default());
        HeadDetector {
            pattern,
            tokens,
            acc,
            n_heads,
            exclude_bos: false,
            exclude_current_token: false,
            targeted_rows_only: false,
        }
    }

    /// Ignore attention to position 0 (TransformerLens's `exclude_bos`).
    pub fn exclude_bos(mut self, yes: bool) -> Self {
        self.exclude_bos = yes;
        self
    }

    /// Ignore attention to the query's own position (`exclude_current_token`).
    pub fn exclude_current_token(mut self, yes: bool) -> Self {
        self.exclude_current_token = yes;
        self
    }

    /// Count only the query rows with at least one target in the detection pattern.
    pub fn targeted_rows_only(mut self, yes: bool) -> Self {
        self.targeted_rows_only = yes;
        self
    }

    /// The score of `head` so far.
    pub fn score(&self, head: Head) -> f32 {
        self.acc
            .get(head.index(self.n_heads))
            .map_or(0.0, |r| r.value())
    }

    /// The accumulated ratios, `[n_layers][n_heads]`.
    pub fn ratios(&self) -> &[Ratio] {
        self.acc
    }
}

impl Hooks for HeadDetector<'_> {
    #[inline]
    fn wants(&self, kind: HookKind) -> bool {
        kind == HookKind::Pattern
    }

    fn hook(&mut self, p: HookPoint, row: &mut [f32]) {
        if p.kind != HookKind::Pattern || p.pos >= self.tokens.len() {
            return;
        }
        let (pattern, tokens) = (self.pattern, self.tokens);
        if self.targeted_rows_only && !(0..row.len()).any(|key| pattern.target(tokens, p.pos, key))
        {
            return;
        }
        let Some(r) = self
            .acc
            .get_mut(Head::new(p.layer, p.head).index(self.n_heads))
        else {
            return;
        };
        for (key, &a) in row.iter().enumerate() {
            if (self.exclude_bos && key == 0) || (self.exclude_current_token && key == p.pos) {
                continue;
            }
            r.den += a;
            if pattern.target(tokens, p.pos, key) {
                r.num += a;
            }
        }
    }
}
