//! The files of a trained LLaMA-family model: `<name>.safetensors` (TransformerLens state-dict names
//! and shapes, f32, the biases TransformerLens keeps for these models as zeros), `<name>.json` (its
//! `HookedTransformerConfig`) and llama2.c's `tokenizer.bin`, each written atomically.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::llama::Llama;
use super::model::values;
use crate::import::state_dict::Tensor as StateTensor;
use crate::io::output::atomic_write;
use crate::io::safetensors::to_safetensors_with;

/// The three files written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
    /// `<dir>/<name>.safetensors`.
    pub weights: PathBuf,
    /// `<dir>/<name>.json`.
    pub config: PathBuf,
    /// `<dir>/tokenizer.bin`.
    pub tokenizer: PathBuf,
}

/// Writes the model and its tokenizer (`tokenizer_bin`, the file's bytes) into `dir` (created if
/// missing).
pub fn export(
    model: &Llama,
    dir: &Path,
    name: &str,
    seed: u64,
    tokenizer_bin: &[u8],
) -> Result<Exported> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let out = Exported {
        weights: dir.join(format!("{name}.safetensors")),
        config: dir.join(format!("{name}.json")),
        tokenizer: dir.join(crate::text::llama2c::FILE_NAME),
    };
    let mut tensors = BTreeMap::new();
    for (n, v) in model.named_vars() {
        tensors.insert(n, StateTensor::new(v.dims().to_vec(), values(v)?)?);
    }
    for (n, shape) in model.zero_biases() {
        let len = shape.iter().product();
        tensors.insert(n, StateTensor::new(shape, vec![0.0; len])?);
    }
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    atomic_write(
        &out.weights,
        &to_safetensors_with(&tensors, Some(metadata))?,
    )?;
    let text = serde_json::to_string_pretty(&model.tl_config(name, seed))? + "\n";
    atomic_write(&out.config, text.as_bytes())?;
    atomic_write(&out.tokenizer, tokenizer_bin)?;
    Ok(out)
}
