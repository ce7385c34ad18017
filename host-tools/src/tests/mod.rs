//! Unit tests across the converter: processing preserves the function, bad inputs are refused cleanly,
//! every container and naming scheme reads to the same state dict.

mod bad_inputs;
mod checkpoints;
mod processing;
mod properties;
pub(crate) mod random_model;
