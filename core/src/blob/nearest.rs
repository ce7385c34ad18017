//! A matrix encoded as a [`TensorData`] of any storage type, each weight rounded to its nearest step with
//! the row encoders of [`crate::quant::encode`] (host only: features `std` and `encode`).

use std::vec;

use super::{DType, TensorData};
use crate::quant::encode::{i4_row, i8_row, i8g_row};
use crate::tensors::TensorId;

impl TensorData {
    /// Tensor `id` of `shape` (`[rows, cols]`, row-major `values` in blob layout) stored as `dtype`:
    /// `f32` and `f16` as they are (`f16` rounding to nearest, overflowing to infinity), `i8`, `i4` and
    /// `i8g` through the encoders `i8_row`, `i4_row` and `i8g_row`. `None` when a size overflows or a row cannot be encoded (a NaN,
    /// or a value beyond the scale range).
    pub fn encode_nearest(
        id: TensorId,
        shape: [usize; 2],
        values: &[f32],
        dtype: DType,
    ) -> Option<Self> {
        let [rows, cols] = shape;
        let mut data = vec![0u8; dtype.data_len(rows, cols)?];
        let mut scales = vec![0.0f32; dtype.n_scales(rows, cols)?];
        let row_values = values.chunks(cols.max(1));
        match dtype {
            DType::F32 => data = values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DType::F16 => {
                data = values
                    .iter()
                    .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                    .collect()
            }
            DType::I8 => {
                for ((row, out), s) in row_values
                    .zip(data.chunks_mut(cols.max(1)))
                    .zip(&mut scales)
                {
                    *s = i8_row(row, out)?;
                }
            }
            DType::I4 | DType::I8G => {
                let row_bytes = dtype.row_bytes(cols)?.max(1);
                let groups = dtype.groups(cols).max(1);
                let encode = match dtype {
                    DType::I4 => i4_row,
                    _ => i8g_row,
                };
                for ((row, out), s) in row_values
                    .zip(data.chunks_mut(row_bytes))
                    .zip(scales.chunks_mut(groups))
                {
                    encode(row, out, s)?;
                }
            }
        }
        Some(TensorData {
            id,
            dtype,
            shape,
            data,
            scales,
        })
    }
}
