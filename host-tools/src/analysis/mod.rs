//! Circuit analysis on the host ("A Mathematical Framework for Transformer Circuits", causal mediation):
//! token-space QK/OV circuits with skip-trigram tables, eigenvalue copying scores, the zero-layer bigram
//! table, composition scores with their random baseline, head detectors, direct logit attribution, the
//! ablation table, activation patching and causal tracing ([`tracing`]).
//!
//! The weight maths are plain functions on TransformerLens-shaped matrices ([`HeadWeights`]: `W_Q` is
//! `[d_model, d_head]`, `W_O` is `[d_head, d_model]`, right-multiplying), in `f64`, with low-rank products
//! kept factored ([`Factored`]): nothing `d_vocab x d_vocab` is ever built. Everything that runs the model
//! does so with the core crate's `Session` and its ready-made hooks (`microlens::analysis`).

mod ablation;
mod attribution;
mod bigram;
pub mod circuits;
mod composition;
mod copying;
mod detectors;
mod factored;
pub mod head_figures;
mod patching;
mod token_circuits;
pub mod tracing;
mod weights;

pub use ablation::{ablation_table, loss_with_ablation, mean_loss, AblationTable};
pub use attribution::{
    direct_logit_attribution, last_position_attribution, logit_diff_attribution,
};
pub use bigram::bigram_circuit;
pub use composition::{
    all_composition_scores, composition_baseline, composition_score, Baseline, CompositionMode,
    CompositionScores,
};
pub use copying::{copying_score, full_ov_copying_score, ov_copying_score};
pub use detectors::{head_scores, HeadScores};
pub use factored::{Entry, Factored};
pub use patching::{activation_patching, logit_diff, Patching};
pub use token_circuits::{ov_circuit, qk_circuit, skip_trigrams, SkipTrigram};
pub use weights::{CircuitWeights, HeadWeights, Mat};
