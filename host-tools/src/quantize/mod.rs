//! Quantisers: `f32` matrices (blob layout, row-major) to `f16`, `i8` (symmetric, one scale per row) or
//! `i4` (symmetric, one scale per group of 32 along each row, two values per byte) blob tensors. The
//! rows go through the core's own encoders ([`microlens::quant::encode`]), so the host rounds exactly as
//! the device does; the way back goes through the core's [`Matrix`] reader.
//!
//! Integer weights are rounded to nearest, or with GPTQ ([`gptq`]): over the whole model
//! ([`compensation`]), each matrix against the inputs it sees on calibration sequences
//! ([`calibration`]) and the lookup tables (`W_E`, `W_pos`, `pos_Q`, `pos_K`) against the output
//! Fisher ([`tables`]). The layout and the scales' format are the same either way, so the device
//! maths is too.

pub mod calibration;
pub mod compensation;
pub mod gptq;
pub mod search;
pub mod tables;

use anyhow::{anyhow, ensure, Result};
use microlens::blob::{Activations, TensorData, I4_GROUP};
use microlens::quant::encode;
use microlens::tensors::Catalogue;
use microlens::weights::Matrix;
use microlens::{DType, Model, TensorId};

use crate::encode::MatrixEncoder;

/// The activation arithmetic a blob of `dtype` matrices runs with by default: int8 (W8A8, int8 KV
/// cache) for the integer dtypes, `f32` otherwise.
pub fn default_activations(dtype: DType) -> Activations {
    match dtype {
        DType::F32 | DType::F16 => Activations::F32,
        DType::I8 | DType::I4 => Activations::I8,
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

/// Encodes a `[rows, cols]` matrix of row-major `values` as `dtype`.
pub fn encode_matrix(
    id: TensorId,
    shape: [usize; 2],
    values: &[f32],
    dtype: DType,
) -> Result<TensorData> {
    check_values(id, shape, values)?;
    let [rows, cols] = shape;
    let len = dtype
        .data_len(rows, cols)
        .ok_or_else(|| anyhow!("tensor {id} is too large"))?;
    let n_scales = dtype
        .n_scales(rows, cols)
        .ok_or_else(|| anyhow!("tensor {id} is too large"))?;
    let (mut data, mut scales) = (vec![0u8; len], vec![0.0f32; n_scales]);
    let row_chunks = values.chunks(cols.max(1));
    match dtype {
        DType::F32 => data = values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::F16 => {
            let max = half::f16::MAX.to_f32();
            ensure!(
                values.iter().all(|v| v.abs() <= max),
                "tensor {id} has a value beyond the f16 range"
            );
            data = values
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect();
        }
        DType::I8 => {
            for ((row, out), s) in row_chunks
                .zip(data.chunks_mut(cols.max(1)))
                .zip(&mut scales)
            {
                *s = encode::i8_row(row, out)
                    .ok_or_else(|| anyhow!("tensor {id} has a value beyond the i8 scale range"))?;
            }
        }
        DType::I4 => {
            let row_bytes = DType::I4.row_bytes(cols).unwrap_or(0).max(1);
            let groups = cols.div_ceil(I4_GROUP).max(1);
            for ((row, out), s) in row_chunks
                .zip(data.chunks_mut(row_bytes))
                .zip(scales.chunks_mut(groups))
            {
                encode::i4_row(row, out, s)
                    .ok_or_else(|| anyhow!("tensor {id} has a value beyond the i4 scale range"))?;
            }
        }
    }
    Ok(TensorData {
        id,
        dtype,
        shape,
        data,
        scales,
    })
}

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
    let m = Matrix::from_parts(t.dtype, rows, cols, &t.data, &scales).ok_or_else(|| {
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

/// A [`MatrixEncoder`] for one storage type.
#[derive(Clone, Copy, Debug)]
pub struct Quantizer(pub DType);

impl MatrixEncoder for Quantizer {
    fn dtype(&self) -> DType {
        self.0
    }
    fn encode(&self, id: TensorId, shape: [usize; 2], values: &[f32]) -> Result<TensorData> {
        encode_matrix(id, shape, values, self.0)
    }
}

/// Tensor `id` of a model, a matrix dequantised to `f32` values and re-encoded as `dtype` (rounded to
/// nearest), a vector as `f32`.
pub(crate) fn requantize_tensor(
    model: &Model<'_>,
    id: TensorId,
    dtype: DType,
) -> Result<TensorData> {
    let cfg = model.config();
    let (shape, missing) = (id.shape(cfg), || anyhow!("the model has no tensor {id}"));
    if id.kind.is_matrix() {
        let m = model.matrix(id).ok_or_else(missing)?;
        encode_matrix(id, shape, &matrix_values(&m), dtype)
    } else {
        let v: Vec<f32> = model.vector(id).ok_or_else(missing)?.iter().collect();
        encode_matrix(id, shape, &v, DType::F32)
    }
}

/// Every tensor of a model, matrices dequantised to `f32` values and re-encoded as `dtype`.
pub fn requantize_tensors(model: &Model<'_>, dtype: DType) -> Result<Vec<TensorData>> {
    Catalogue::new(model.config())
        .ids()
        .map(|id| requantize_tensor(model, id, dtype))
        .collect()
}

/// A blob with the same config and processing as `model`, its matrices re-encoded as `dtype` (rounded
/// to nearest) and run with `activations`. From an `f32` blob this is exactly what converting the
/// checkpoint as `dtype` with `--rounding nearest` gives.
pub fn requantize(model: &Model<'_>, dtype: DType, activations: Activations) -> Result<Vec<u8>> {
    let tensors = requantize_tensors(model, dtype)?;
    write_blob(model, activations, &tensors)
}

fn write_blob(
    model: &Model<'_>,
    activations: Activations,
    tensors: &[TensorData],
) -> Result<Vec<u8>> {
    microlens::blob::write(model.config(), *model.processing(), activations, tensors)
        .map_err(|e| anyhow!("cannot write the blob: {e}"))
}

/// How integer weights are rounded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// Each weight to its nearest integer step.
    Nearest,
    /// GPTQ against calibration inputs.
    Gptq(GptqOptions),
}

/// GPTQ's calibration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GptqOptions {
    /// The calibration tokens.
    pub source: calibration::Source,
    /// Which inputs each matrix is rounded against.
    pub against: Against,
}

/// Which inputs GPTQ rounds each matrix against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Against {
    /// The float model's (plain GPTQ, every matrix on its own).
    Float,
    /// The model's own, in forward order: the inputs of the model quantised so far, as the device
    /// multiplies them, with its errors compensated ([`compensation`]).
    #[default]
    Quantized,
}

impl Rounding {
    /// The rounding `microlens convert --dtype` uses unless told otherwise.
    pub fn default_for(dtype: DType) -> Rounding {
        match dtype {
            DType::F16 | DType::I8 | DType::I4 => Rounding::Gptq(GptqOptions::default()),
            DType::F32 => Rounding::Nearest,
        }
    }

    /// `nearest` or `gptq`.
    pub fn name(&self) -> &'static str {
        match self {
            Rounding::Nearest => "nearest",
            Rounding::Gptq(_) => "gptq",
        }
    }
}

/// [`requantize`] with `rounding` for `f16` and integer matrices (`f32` has nothing to round). GPTQ
/// calibrates on `model` itself, which should be the `f32` original.
pub fn requantize_with(
    model: &Model<'_>,
    dtype: DType,
    activations: Activations,
    rounding: &Rounding,
) -> Result<Vec<u8>> {
    let opts = match rounding {
        Rounding::Gptq(opts) if dtype != DType::F32 => opts,
        _ => return requantize(model, dtype, activations),
    };
    let seqs = opts.source.sequences(model)?;
    let tensors = compensation::requantize_tensors(model, dtype, activations, &seqs, opts.against)?;
    write_blob(model, activations, &tensors)
}

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

/// The footprint of `model` re-encoded as each of f32, f16, i8 and i4 (exact: the blobs are written).
pub fn footprints(model: &Model<'_>) -> Result<Vec<Footprint>> {
    [DType::F32, DType::F16, DType::I8, DType::I4]
        .into_iter()
        .map(|dtype| {
            let activations = default_activations(dtype);
            let blob = requantize(model, dtype, activations)?;
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

#[cfg(test)]
mod tests {
    use super::*;
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
        for dtype in [DType::F32, DType::F16, DType::I8, DType::I4] {
            let t = encode_matrix(id, [rows, cols], &v, dtype).unwrap();
            let back = decode_matrix(&t).unwrap();
            for (i, (&a, &b)) in v.iter().zip(&back).enumerate() {
                let (r, c) = (i / cols, i % cols);
                let bound = match dtype {
                    DType::F32 => 0.0,
                    DType::F16 => a.abs() / 2048.0,
                    DType::I8 => t.scales[r] / 2.0,
                    DType::I4 => t.scales[r * cols.div_ceil(I4_GROUP) + c / I4_GROUP] / 2.0,
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
            encode_matrix(id, [3, 40], &v, d)
                .map(|t| (t.data.len(), t.scales.len()))
                .unwrap()
        };
        assert_eq!(len(DType::F32), (480, 0));
        assert_eq!(len(DType::F16), (240, 0));
        assert_eq!(len(DType::I8), (120, 3));
        assert!(encode_matrix(id, [1, 2], &[1.0, 1e7], DType::I8).is_err());
        assert_eq!(len(DType::I4), (60, 6));
        assert!(encode_matrix(id, [1, 2], &[1.0, f32::NAN], DType::I8).is_err());
        assert!(encode_matrix(id, [1, 2], &[1.0, 1e6], DType::F16).is_err());
    }
}
