//! Host side of microlens: read checkpoints, process weights as TransformerLens does, write blobs, run,
//! compare and analyse them with the `microlens` core crate's own forward pass.
//!
//! The modules follow the pipeline, each layer using only the ones before it:
//! [`io`] (files) -> [`text`] (tokenizers) -> [`import`] (checkpoints to a TL state dict) -> [`convert`] (fold, lay out, encode
//! a blob) -> [`quantize`] -> [`eval`] (run a blob, metrics, token sequences) -> [`fidelity`] and
//! [`analysis`] (numbers) -> [`report`] (text, JSON, plots). [`train`] trains the tiny induction and fact models; [`edit`] writes facts into a model's MLP (ROME, MEMIT).
//! The `microlens` binary's `cli` module parses arguments and calls these; nothing here calls it.

pub mod analysis;
pub mod convert;
pub mod edit;
pub mod eval;
pub mod excerpt;
pub mod fidelity;
pub mod hash;
pub mod import;
pub mod io;
pub mod quantize;
pub mod report;
pub mod text;
pub mod train;
