//! Checkpoints: safetensors or PyTorch `.pth` files, with TransformerLens, HF GPT-2 or HF Llama names, or
//! llama2.c `.bin` files ([`llama2c`]), all read into
//! one TL-named [`StateDict`] of `f32` tensors and checked against the config (missing tensors, shapes,
//! NaN/Inf, unexpected tensors), each error naming the tensor. The TransformerLens config ([`tl_config`])
//! and TL shapes <-> blob layout ([`layout`]) live here too.

mod hf_gpt2;
pub mod layout;
pub mod llama;
pub mod llama2c;
mod pickle_check;
mod pth;
mod safetensors;
pub mod state_dict;
pub mod tl_config;

#[cfg(test)]
pub(crate) mod random_model;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, ensure, Result};
use microlens::tensors::Catalogue;
use microlens::{Config, TensorKind};

use crate::import::layout::check_tl_shape;
use crate::import::state_dict::{StateDict, Tensor};

/// Parses the pickle of a `.pth` file (its `data.pkl`) as a state dict, bounded in depth and size
/// (`pickle_check`): the number of items it holds. What [`parse`] does to a `.pth` file's pickle.
pub fn parse_pickle(pickle: &[u8]) -> Result<usize> {
    Ok(pth::state_dict_items(pickle)?.len())
}

/// One named array of a checkpoint file, before any naming convention is applied.
#[derive(Clone, Debug, PartialEq)]
pub enum RawTensor {
    /// A floating-point tensor, converted to `f32`.
    Float(Tensor),
    /// Anything else (bool masks, integer buffers): only its description.
    Other(String),
}

/// Floating-point storage types a checkpoint may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloatDType {
    F16,
    BF16,
    F32,
    F64,
}

/// Decodes little-endian values of `dtype` to `f32`.
pub(crate) fn decode_floats(dtype: FloatDType, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        FloatDType::F16 => bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        FloatDType::BF16 => bytes
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        FloatDType::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        FloatDType::F64 => bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f32)
            .collect(),
    }
}

/// Every array of a safetensors or `.pth` (zip) file, told apart by their first bytes.
pub fn read_file(path: &Path) -> Result<BTreeMap<String, RawTensor>> {
    parse(&crate::io::files::read_checkpoint(path)?)
}

/// Every array of safetensors or `.pth` (zip) bytes, told apart by their first bytes.
pub fn parse(bytes: &[u8]) -> Result<BTreeMap<String, RawTensor>> {
    if bytes.starts_with(b"PK\x03\x04") {
        pth::read(bytes)
    } else {
        safetensors::read(bytes)
    }
}

/// A TL state dict of `cfg` from the arrays of a checkpoint (TL or HF GPT-2 names), checked with
/// [`validate`].
pub fn state_dict(raw: BTreeMap<String, RawTensor>, cfg: &Config) -> Result<StateDict> {
    ensure!(!raw.is_empty(), "no tensors found");
    let sd = if hf_gpt2::is_hf_gpt2(raw.keys()) {
        hf_gpt2::to_tl(floats(raw, hf_gpt2::is_buffer)?, cfg)?
    } else if llama::is_hf_llama(raw.keys()) {
        llama::to_tl(floats(raw, llama::is_buffer)?, cfg)?
    } else {
        floats(raw, is_tl_buffer)?
            .into_iter()
            .map(|(name, t)| (tl_gqa_name(name), t))
            .collect()
    };
    validate(&sd, cfg)?;
    Ok(sd)
}

/// TransformerLens's names of grouped-query attention's key/value parameters (`attn._W_K`, `_b_K`,
/// `_W_V`, `_b_V`) as this crate names them (`attn.W_K`, ..., with `n_key_value_heads` heads).
fn tl_gqa_name(name: String) -> String {
    match name.rsplit_once(".attn._") {
        Some((block, leaf)) if ["W_K", "b_K", "W_V", "b_V"].contains(&leaf) => {
            format!("{block}.attn.{leaf}")
        }
        _ => name,
    }
}

/// Buffers a TransformerLens state dict carries that are not parameters (`mask`, `IGNORE`, rotary tables).
fn is_tl_buffer(name: &str) -> bool {
    name.starts_with("blocks.")
        && [
            ".attn.mask",
            ".attn.IGNORE",
            ".attn.rotary_sin",
            ".attn.rotary_cos",
        ]
        .iter()
        .any(|s| name.ends_with(s))
}

/// Drops the buffers, and refuses any other non-float array.
fn floats(
    raw: BTreeMap<String, RawTensor>,
    is_buffer: fn(&str) -> bool,
) -> Result<BTreeMap<String, Tensor>> {
    let mut out = BTreeMap::new();
    for (name, t) in raw {
        match t {
            _ if is_buffer(&name) => {}
            RawTensor::Float(t) => {
                out.insert(name, t);
            }
            RawTensor::Other(what) => bail!("tensor {name} is {what}, not floating point"),
        }
    }
    Ok(out)
}

/// Reads a checkpoint (TL or HF GPT-2 names, detected from the names) as a TL state dict of `cfg`, and
/// checks it with [`validate`].
pub fn load(path: &Path, cfg: &Config) -> Result<StateDict> {
    state_dict(read_file(path)?, cfg)
}

/// Checks that `sd` holds exactly the parameters of `cfg`, each in its TL shape and finite.
pub fn validate(sd: &StateDict, cfg: &Config) -> Result<()> {
    let ids: Vec<_> = Catalogue::new(cfg)
        .ids()
        .filter(|id| !matches!(id.kind, TensorKind::PosQ | TensorKind::PosK))
        .collect();
    for id in &ids {
        check_tl_shape(*id, cfg, sd.get(&id.to_string())?)?;
    }
    let expected: std::collections::BTreeSet<String> =
        ids.iter().map(|id| id.to_string()).collect();
    for (name, t) in sd.iter() {
        ensure!(
            expected.contains(name),
            "unexpected tensor {name} (not a parameter of a model with this config)"
        );
        ensure!(
            t.data.iter().all(|v| v.is_finite()),
            "tensor {name} has NaN or infinite values"
        );
    }
    Ok(())
}
