//! Previous-token and induction scores of every head, computed on the device from the attention
//! patterns (a hook on `hook_pattern`), with TransformerLens's definitions:
//! - previous-token score: mean attention from each position to the one before it;
//! - induction score: mean attention, over the second copy of the segment, from each position to the
//!   token after the previous occurrence of the current token (`pos - segment_len + 1`).

use microlens::analysis::Head;
use microlens::{HookKind, HookPoint, Hooks};

use crate::model::{N_HEADS, N_LAYERS};
use crate::prompt::Prompt;

/// Per-head scores, `[layer][head]`.
pub type Table = [[f32; N_HEADS]; N_LAYERS];

/// A hook summing, per head, the attention both scores average.
pub struct HeadScores {
    prefix_len: usize,
    segment_len: usize,
    len: usize,
    prev_token: Table,
    induction: Table,
}

impl HeadScores {
    /// Empty sums for a run of `prompt`.
    pub fn new(prompt: &Prompt) -> Self {
        HeadScores {
            prefix_len: prompt.prefix_len(),
            segment_len: prompt.segment_len(),
            len: prompt.tokens().len(),
            prev_token: [[0.0; N_HEADS]; N_LAYERS],
            induction: [[0.0; N_HEADS]; N_LAYERS],
        }
    }

    /// The previous-token scores of `layer`'s heads, once the whole prompt has run.
    pub fn prev_token(&self, layer: usize) -> [f32; N_HEADS] {
        mean(&self.prev_token[layer], self.len.saturating_sub(1))
    }

    /// The induction scores of `layer`'s heads, once the whole prompt has run.
    pub fn induction(&self, layer: usize) -> [f32; N_HEADS] {
        mean(&self.induction[layer], self.segment_len)
    }

    /// The heads whose induction score is at least `threshold`, in layer and head order, and how many
    /// there are; the best head alone (the first of equal ones) if none reaches it.
    pub fn induction_heads(&self, threshold: f32) -> ([Head; N_LAYERS * N_HEADS], usize) {
        let mut heads = [Head::new(0, 0); N_LAYERS * N_HEADS];
        let (mut n, mut best) = (0, (Head::new(0, 0), f32::NEG_INFINITY));
        for l in 0..N_LAYERS {
            for (h, s) in self.induction(l).into_iter().enumerate() {
                if s >= threshold {
                    heads[n] = Head::new(l, h);
                    n += 1;
                }
                if s > best.1 {
                    best = (Head::new(l, h), s);
                }
            }
        }
        if n == 0 {
            heads[0] = best.0;
            n = 1;
        }
        (heads, n)
    }
}

/// `sums / n` (0 for no sums).
fn mean(sums: &[f32; N_HEADS], n: usize) -> [f32; N_HEADS] {
    sums.map(|s| s / n.max(1) as f32)
}

impl Hooks for HeadScores {
    fn wants(&self, kind: HookKind) -> bool {
        kind == HookKind::Pattern
    }

    fn hook(&mut self, point: HookPoint, pattern: &mut [f32]) {
        let q = point.pos;
        let (Some(prev), Some(ind)) = (
            self.prev_token
                .get_mut(point.layer)
                .and_then(|l| l.get_mut(point.head)),
            self.induction
                .get_mut(point.layer)
                .and_then(|l| l.get_mut(point.head)),
        ) else {
            return;
        };
        if q >= 1 {
            *prev += pattern.get(q - 1).copied().unwrap_or(0.0);
        }
        let repeat = self.prefix_len + self.segment_len;
        if q >= repeat && q < repeat + self.segment_len {
            *ind += pattern
                .get(q + 1 - self.segment_len)
                .copied()
                .unwrap_or(0.0);
        }
    }
}
