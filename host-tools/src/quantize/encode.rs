//! Encoding blob-layout values into a blob tensor: vectors are always `f32`; matrices go through a
//! [`MatrixEncoder`] chosen by the requested storage type, so a quantiser plugs in per matrix.

use anyhow::{ensure, Context, Result};
use microlens::blob::{Activations, TensorData};
use microlens::{DType, TensorId};

/// The activation arithmetic a blob of `dtype` matrices runs with by default: int8 (W8A8, int8 KV
/// cache) for the integer dtypes, `f32` otherwise.
pub fn default_activations(dtype: DType) -> Activations {
    match dtype {
        DType::F32 | DType::F16 => Activations::F32,
        DType::I8 | DType::I4 | DType::I8G => Activations::I8,
    }
}

/// Refuses `values` that do not fill `shape` or hold a NaN or infinite value.
pub(crate) fn check_values(id: TensorId, shape: [usize; 2], values: &[f32]) -> Result<()> {
    ensure!(
        values.len() == shape[0] * shape[1],
        "tensor {id}: {} values for shape {shape:?}",
        values.len()
    );
    ensure!(
        values.iter().all(|v| v.is_finite()),
        "tensor {id} has a NaN or infinite value"
    );
    Ok(())
}

/// Turns one matrix (`[rows, cols]`, blob layout, row-major `f32`) into blob tensor data.
pub trait MatrixEncoder {
    /// The storage type this encoder writes.
    fn dtype(&self) -> DType;
    /// Encodes matrix `id`.
    fn encode(&self, id: TensorId, shape: [usize; 2], values: &[f32]) -> Result<TensorData>;
    /// The activation arithmetic a blob of these matrices runs with: int8 (W8A8 matmuls, int8 KV cache)
    /// for integer matrices, `f32` otherwise.
    fn activations(&self) -> Activations {
        default_activations(self.dtype())
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

/// Encodes tensor `id`: matrices with `encoder`, vectors as `f32`; refuses non-finite values.
pub fn encode_tensor(
    encoder: &dyn MatrixEncoder,
    id: TensorId,
    shape: [usize; 2],
    values: &[f32],
) -> Result<TensorData> {
    check_values(id, shape, values).context("after processing")?;
    if id.kind.is_matrix() {
        encoder.encode(id, shape, values)
    } else {
        Ok(f32_tensor(id, shape, values))
    }
}
