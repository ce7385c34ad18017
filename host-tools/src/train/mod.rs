//! Training the tiny attention-only induction model on the CPU with candle, and exporting it in
//! TransformerLens's format (`microlens train-induction`).
//!
//! The forward pass is TransformerLens's `HookedTransformer` (attention-only, optional LayerNorm, standard
//! or shortformer positions), so the exported weights give the same loss in TransformerLens and in the
//! `microlens` core crate.

pub mod bpe;
pub mod budget;
pub mod causal_softmax;
pub mod data;
pub mod eval;
pub mod export;
pub mod facts;
pub mod heldout;
pub mod layer_norm;
pub mod llama;
pub mod llama_export;
pub mod loss;
pub mod mlp;
pub mod model;
pub mod params;
pub mod phrases;
pub mod rows;
pub mod sequence;
pub mod shards;
pub mod stories;
pub mod token_stream;
pub mod trainer;

#[cfg(test)]
mod llama_tests;
#[cfg(test)]
mod tests;

use anyhow::Result;
use candle_core::{Tensor, Var};

/// A model the trainer optimises: its logits for a batch of tokens and its trained variables.
pub trait Trainable: Sync {
    /// Logits `[batch, pos, d_vocab]` of `tokens` (`u32 [batch, pos]`).
    fn logits(&self, tokens: &Tensor) -> Result<Tensor>;
    /// Every trained variable, in a fixed order.
    fn vars(&self) -> Vec<Var>;
}
