//! safetensors files: every tensor, floats converted to `f32`.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use safetensors::{Dtype, SafeTensors};

use super::{decode_floats, FloatDType, RawTensor};
use crate::import::state_dict::Tensor;

/// Every tensor of a safetensors file.
pub(super) fn read(bytes: &[u8]) -> Result<BTreeMap<String, RawTensor>> {
    let st = SafeTensors::deserialize(bytes).context("not a safetensors or PyTorch zip file")?;
    st.iter()
        .map(|(name, view)| {
            let dtype = match view.dtype() {
                Dtype::F16 => Some(FloatDType::F16),
                Dtype::BF16 => Some(FloatDType::BF16),
                Dtype::F32 => Some(FloatDType::F32),
                Dtype::F64 => Some(FloatDType::F64),
                _ => None,
            };
            let raw = match dtype {
                Some(d) => RawTensor::Float(Tensor::new(
                    view.shape().to_vec(),
                    decode_floats(d, view.data()),
                )?),
                None => RawTensor::Other(format!("{:?} {:?}", view.dtype(), view.shape())),
            };
            Ok((name.to_string(), raw))
        })
        .collect()
}
