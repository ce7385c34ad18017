//! Host side of microlens: read checkpoints, process weights as TransformerLens does, write blobs, run,
//! compare and analyse them with the `microlens` core crate's own forward pass.

pub mod analysis;
pub mod cache;
pub mod checkpoint;
pub mod commands;
pub mod convert;
pub mod encode;
pub mod fidelity;
pub mod files;
pub mod fold;
pub mod hash;
pub mod layout;
pub mod quantize;
pub mod run;
pub mod shortformer;
pub mod state_dict;
pub mod tl_config;
pub mod train;

#[cfg(test)]
mod tests;
