//! Encoding blob-layout values into a blob tensor: vectors are always `f32`; matrices go through a
//! [`MatrixEncoder`] chosen by the requested storage type, so a quantiser plugs in per matrix.

use anyhow::{bail, Context, Result};
use microlens::blob::{Activations, TensorData};
use microlens::{DType, TensorId};

use crate::quantize::Quantizer;

/// Turns one matrix (`[rows, cols]`, blob layout, row-major `f32`) into blob tensor data.
pub trait MatrixEncoder {
    /// The storage type this encoder writes.
    fn dtype(&self) -> DType;
    /// Encodes matrix `id`.
    fn encode(&self, id: TensorId, shape: [usize; 2], values: &[f32]) -> Result<TensorData>;
    /// The activation arithmetic a blob of these matrices runs with: int8 (W8A8 matmuls, int8 KV cache)
    /// for integer matrices, `f32` otherwise.
    fn activations(&self) -> Activations {
        crate::quantize::default_activations(self.dtype())
    }
}

/// Plain little-endian `f32`.
#[derive(Clone, Copy, Debug, Default)]
pub struct F32Encoder;

impl MatrixEncoder for F32Encoder {
    fn dtype(&self) -> DType {
        DType::F32
    }
    fn encode(&self, id: TensorId, shape: [usize; 2], values: &[f32]) -> Result<TensorData> {
        Ok(f32_tensor(id, shape, values))
    }
}

/// An `f32` tensor (every vector, and matrices stored unquantised).
pub fn f32_tensor(id: TensorId, shape: [usize; 2], values: &[f32]) -> TensorData {
    TensorData {
        id,
        dtype: DType::F32,
        shape,
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        scales: Vec::new(),
    }
}

/// Parses the CLI's `--dtype` (`f32`, `f16`, `i8`, `i4`).
pub fn parse_dtype(name: &str) -> Result<DType> {
    Ok(match name {
        "f32" => DType::F32,
        "f16" => DType::F16,
        "i8" => DType::I8,
        "i4" => DType::I4,
        other => bail!("unknown dtype {other:?} (f32, f16, i8 or i4)"),
    })
}

/// The matrix encoder for `dtype`: `f32` as is, `f16`, `i8` and `i4` through [`Quantizer`].
pub fn encoder_for(dtype: DType) -> Result<Box<dyn MatrixEncoder>> {
    match dtype {
        DType::F32 => Ok(Box::new(F32Encoder)),
        other => Ok(Box::new(Quantizer(other))),
    }
}

/// Encodes tensor `id`: matrices with `encoder`, vectors as `f32`; refuses non-finite values.
pub fn encode_tensor(
    encoder: &dyn MatrixEncoder,
    id: TensorId,
    shape: [usize; 2],
    values: &[f32],
) -> Result<TensorData> {
    crate::quantize::check_values(id, shape, values).context("after processing")?;
    if id.kind.is_matrix() {
        encoder.encode(id, shape, values)
    } else {
        Ok(f32_tensor(id, shape, values))
    }
}
