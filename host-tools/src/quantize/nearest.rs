//! Rounding to nearest: each weight to its nearest step of the core's own encoders
//! ([`microlens::encode`], through [`TensorData::encode_nearest`]), so the host rounds exactly as
//! the device does.

use anyhow::{anyhow, ensure, Result};
use microlens::blob::TensorData;
use microlens::{DType, TensorId};

use super::encode::{check_values, F32Encoder, MatrixEncoder};

/// The matrix encoder for `dtype`: `f32` as is, `f16`, `i8` and `i4` through [`Quantizer`].
pub fn encoder_for(dtype: DType) -> Result<Box<dyn MatrixEncoder>> {
    match dtype {
        DType::F32 => Ok(Box::new(F32Encoder)),
        other => Ok(Box::new(Quantizer(other))),
    }
}

/// Encodes a `[rows, cols]` matrix of row-major `values` as `dtype`.
pub fn encode_nearest(
    id: TensorId,
    shape: [usize; 2],
    values: &[f32],
    dtype: DType,
) -> Result<TensorData> {
    check_values(id, shape, values)?;
    let [rows, cols] = shape;
    ensure!(
        dtype.data_len(rows, cols).is_some() && dtype.n_scales(rows, cols).is_some(),
        "tensor {id} is too large"
    );
    if dtype == DType::F16 {
        let max = half::f16::MAX.to_f32();
        ensure!(
            values.iter().all(|v| v.abs() <= max),
            "tensor {id} has a value beyond the f16 range"
        );
    }
    TensorData::encode_nearest(id, shape, values, dtype).ok_or_else(|| {
        anyhow!(
            "tensor {id} has a value beyond the {} scale range",
            dtype.name()
        )
    })
}

/// A [`MatrixEncoder`] for one storage type.
#[derive(Clone, Copy, Debug)]
pub struct Quantizer(pub DType);

impl MatrixEncoder for Quantizer {
    fn dtype(&self) -> DType {
        self.0
    }
    fn encode(&self, id: TensorId, shape: [usize; 2], values: &[f32]) -> Result<TensorData> {
        encode_nearest(id, shape, values, self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantize::decode::decode_matrix;
    use microlens::TensorKind;

    fn values(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1.0 + (i % 13) as f32))
            .collect()
    }

    #[test]
    fn round_trips_stay_within_half_a_step() {
        let id = TensorId::layer(TensorKind::WIn, 0);
        let (rows, cols) = (5, 77);
        let v = values(rows * cols);
        for dtype in DType::ALL {
            let t = encode_nearest(id, [rows, cols], &v, dtype).unwrap();
            let back = decode_matrix(&t).unwrap();
            for (i, (&a, &b)) in v.iter().zip(&back).enumerate() {
                let (r, c) = (i / cols, i % cols);
                let bound = match dtype {
                    DType::F32 => 0.0,
                    DType::F16 => a.abs() / 2048.0,
                    DType::I8 => t.scales[r] / 2.0,
                    DType::I4 | DType::I8G => {
                        let g = dtype.group(cols);
                        t.scales[r * cols.div_ceil(g) + c / g] / 2.0
                    }
                };
                assert!(
                    (a - b).abs() <= bound * 1.0001,
                    "{dtype:?} [{r}, {c}]: {a} -> {b}"
                );
            }
        }
    }

    #[test]
    fn sizes_follow_the_dtype() {
        let id = TensorId::global(TensorKind::WU);
        let v = values(3 * 40);
        let len = |d| {
            encode_nearest(id, [3, 40], &v, d)
                .map(|t| (t.data.len(), t.scales.len()))
                .unwrap()
        };
        assert_eq!(len(DType::F32), (480, 0));
        assert_eq!(len(DType::F16), (240, 0));
        assert_eq!(len(DType::I8), (120, 3));
        assert!(encode_nearest(id, [1, 2], &[1.0, 1e7], DType::I8).is_err());
        assert_eq!(len(DType::I4), (60, 6));
        assert_eq!(len(DType::I8G), (120, 15));
        assert!(encode_nearest(id, [1, 2], &[1.0, f32::NAN], DType::I8).is_err());
        assert!(encode_nearest(id, [1, 2], &[1.0, 1e6], DType::F16).is_err());
    }
}
