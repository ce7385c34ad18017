//! The way back: the values a blob tensor stands for, read through the core's [`Matrix`] reader.

use anyhow::{anyhow, Result};
use microlens::blob::TensorData;
use microlens::weights::Matrix;

/// The values a blob tensor stands for (row-major `f32`), decoded by the core.
pub fn decode_matrix(t: &TensorData) -> Result<Vec<f32>> {
    let scales: Vec<u8> = t
        .scales
        .iter()
        .map(|&s| {
            microlens::blob::encode_scale(s)
                .ok_or_else(|| anyhow!("tensor {}: scale {s} is not a positive f16", t.id))
        })
        .collect::<Result<Vec<_>>>()?
        .concat();
    let [rows, cols] = t.shape;
    let data = t.blob_data();
    let m = Matrix::from_parts(t.dtype, rows, cols, &data, &scales).ok_or_else(|| {
        anyhow!(
            "tensor {}: byte lengths do not match {} {:?}",
            t.id,
            t.dtype.name(),
            t.shape
        )
    })?;
    Ok(matrix_values(&m))
}

/// Every value of a matrix, dequantised, row-major.
pub fn matrix_values(m: &Matrix<'_>) -> Vec<f32> {
    let mut out = vec![0.0; m.rows() * m.cols()];
    for (r, row) in out.chunks_mut(m.cols().max(1)).enumerate() {
        m.row_into(r, row);
    }
    out
}
