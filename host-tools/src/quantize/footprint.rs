//! The flash and RAM a model needs stored as each dtype (`microlens inspect`).

use anyhow::Result;
use microlens::{DType, Model};

use super::encode::default_activations;
use super::requantize::requantize_nearest;

/// Flash and RAM of a model stored as one dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Footprint {
    /// Storage type of the matrices.
    pub dtype: &'static str,
    /// Activation arithmetic that goes with it ([`default_activations`]).
    pub activations: &'static str,
    /// Blob bytes (flash).
    pub flash_bytes: usize,
    /// Workspace bytes.
    pub workspace_bytes: usize,
    /// KV cache bytes at full context.
    pub kv_cache_bytes: usize,
}

/// The footprint of `model` re-encoded as each dtype (f32, f16, i8, i4, i8g; exact: the blobs are
/// written).
pub fn footprints(model: &Model<'_>) -> Result<Vec<Footprint>> {
    DType::ALL
        .into_iter()
        .map(|dtype| {
            let activations = default_activations(dtype);
            let blob = requantize_nearest(model, dtype, activations)?;
            Ok(Footprint {
                dtype: dtype.name(),
                activations: activations.name(),
                flash_bytes: blob.len(),
                workspace_bytes: 4 * model.workspace_len(),
                kv_cache_bytes: 4 * microlens::KvCache::len(model.config(), activations),
            })
        })
        .collect()
}
