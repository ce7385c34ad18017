//! The memory a training run needs, estimated from its sizes before anything is allocated: sizes whose
//! estimate passes [`MAX_TRAINING_WORDS`] are refused with the figure (products in `f64`, so no size
//! wraps the check).

use anyhow::{ensure, Result};

use super::model::ModelConfig;

/// Largest training footprint accepted (`f32` words: 16 GiB).
pub const MAX_TRAINING_WORDS: f64 = (1u64 << 32) as f64;
const GIB: f64 = (1u64 << 30) as f64;

/// What a training run holds at once.
#[derive(Clone, Copy, Debug)]
pub struct TrainingShape<'a> {
    /// The model's sizes.
    pub model: &'a ModelConfig,
    /// MLP width (0: attention only).
    pub d_mlp: usize,
    /// Sequences per step.
    pub batch: usize,
    /// Held-out sequences evaluated at the end.
    pub eval_size: usize,
}

impl TrainingShape<'_> {
    /// A rough upper bound of the `f32` words training and evaluation hold at once: the parameters with
    /// their gradients and AdamW moments, and per step the activations and attention patterns of a
    /// batch (forward and backward), and the evaluation set's patterns.
    pub fn words(&self) -> f64 {
        let m = self.model;
        let (l, d, h, dh, v, n) = (
            m.n_layers as f64,
            m.d_model as f64,
            m.n_heads as f64,
            m.d_head as f64,
            m.d_vocab as f64,
            m.n_ctx as f64,
        );
        let f = self.d_mlp as f64;
        let params = 2.0 * v * d + n * d + l * (4.0 * h * dh * d + 2.0 * d * f);
        let per_sequence = l * (8.0 * h * dh + 4.0 * d + 3.0 * h * n + 4.0 * f) * n + 2.0 * n * v;
        4.0 * params
            + 2.0 * (self.batch as f64).max(256.0) * per_sequence
            + self.eval_size as f64 * n
    }

    /// Refuses a shape beyond [`MAX_TRAINING_WORDS`], naming the memory it needs, the limit and the
    /// options (`flags`) that shrink it.
    pub fn check(&self, flags: &str) -> Result<()> {
        let words = self.words();
        ensure!(
            words <= MAX_TRAINING_WORDS,
            "these sizes need about {:.0} GiB to train (limit {} GiB): use a smaller {flags}",
            words * 4.0 / GIB,
            MAX_TRAINING_WORDS * 4.0 / GIB
        );
        Ok(())
    }
}
