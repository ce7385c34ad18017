//! `f32` safetensors files (activation caches, TransformerLens state dicts): named tensors to bytes and back.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{bail, Context, Result};
use safetensors::tensor::{Dtype, TensorView};

use crate::import::state_dict::Tensor;

/// safetensors bytes of `tensors` (all `f32`).
pub fn to_safetensors(tensors: &BTreeMap<String, Tensor>) -> Result<Vec<u8>> {
    to_safetensors_with(tensors, None)
}

/// [`to_safetensors`] with a header `__metadata__` map (e.g. `{"format": "pt"}`).
pub fn to_safetensors_with(
    tensors: &BTreeMap<String, Tensor>,
    metadata: Option<HashMap<String, String>>,
) -> Result<Vec<u8>> {
    let bytes: Vec<(&String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(name, t)| {
            (
                name,
                t.shape.clone(),
                t.data.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        })
        .collect();
    let views = bytes
        .iter()
        .map(|(name, shape, data)| {
            Ok((
                name.as_str(),
                TensorView::new(Dtype::F32, shape.clone(), data)?,
            ))
        })
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
    Ok(safetensors::serialize(views, metadata)?)
}

/// Reads an `f32` safetensors file (e.g. a TransformerLens cache) into named tensors.
pub fn read_safetensors(path: &Path) -> Result<BTreeMap<String, Tensor>> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    from_safetensors(&bytes).with_context(|| format!("{}", path.display()))
}

/// Named tensors of `f32` safetensors bytes.
pub fn from_safetensors(bytes: &[u8]) -> Result<BTreeMap<String, Tensor>> {
    let st = safetensors::SafeTensors::deserialize(bytes)?;
    st.tensors()
        .into_iter()
        .map(|(name, view)| {
            if view.dtype() != Dtype::F32 {
                bail!("{name} is {:?}, not F32", view.dtype());
            }
            let data = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            Ok((name, Tensor::new(view.shape().to_vec(), data)?))
        })
        .collect()
}
