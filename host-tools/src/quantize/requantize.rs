//! Re-encoding a model's tensors as another storage type, rounded to nearest or with GPTQ
//! ([`Rounding`]), and writing the blob.

use anyhow::{anyhow, Context, Result};
use microlens::blob::{Activations, TensorData};
use microlens::tensors::Catalogue;
use microlens::{DType, Model, TensorId};

use super::calibration::{self, CalibrationInputs};
use super::compensation;
use super::decode::matrix_values;
use super::nearest::encode_nearest;
use super::plan::Plan;

/// Tensor `id` of a model, a matrix dequantised to `f32` values and re-encoded as `dtype` (rounded to
/// nearest), a vector as `f32`.
pub(crate) fn nearest_tensor(model: &Model<'_>, id: TensorId, dtype: DType) -> Result<TensorData> {
    let cfg = model.config();
    let (shape, missing) = (id.shape(cfg), || anyhow!("the model has no tensor {id}"));
    if id.kind.is_matrix() {
        let m = model.matrix(id).ok_or_else(missing)?;
        encode_nearest(id, shape, &matrix_values(&m), dtype)
    } else {
        let v: Vec<f32> = model.vector(id).ok_or_else(missing)?.iter().collect();
        encode_nearest(id, shape, &v, DType::F32)
    }
}

/// Every tensor of a model, matrices dequantised to `f32` values and re-encoded as `dtype`.
pub fn nearest_tensors(model: &Model<'_>, dtype: DType) -> Result<Vec<TensorData>> {
    Catalogue::new(model.config())
        .ids()
        .map(|id| nearest_tensor(model, id, dtype))
        .collect()
}

/// A blob with the same config and processing as `model`, its matrices re-encoded as `dtype` (the
/// lookup tables as its [`Plan`] stores them; rounded to nearest) and run with `activations`. From an
/// `f32` blob this is exactly what converting the checkpoint as `dtype` with `--rounding nearest` gives.
pub fn requantize_nearest(
    model: &Model<'_>,
    dtype: DType,
    activations: Activations,
) -> Result<Vec<u8>> {
    requantize_nearest_with(model, Plan::of(dtype, activations), activations)
}

/// [`requantize_nearest`] stored as `plan` says.
fn requantize_nearest_with(
    model: &Model<'_>,
    plan: Plan,
    activations: Activations,
) -> Result<Vec<u8>> {
    let tensors: Vec<TensorData> = Catalogue::new(model.config())
        .ids()
        .map(|id| nearest_tensor(model, id, plan.dtype_of(id.kind)))
        .collect::<Result<_>>()?;
    write_blob(model, activations, &tensors)
}

fn write_blob(
    model: &Model<'_>,
    activations: Activations,
    tensors: &[TensorData],
) -> Result<Vec<u8>> {
    let blob = microlens::blob::write(model.config(), *model.processing(), activations, tensors)
        .context("cannot write the blob")?;
    crate::text::hf::with_record(blob, model.tokenizer())
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
    pub against: CalibrationInputs,
}

impl Rounding {
    /// The rounding `microlens convert --dtype` uses unless told otherwise.
    pub fn default_for(dtype: DType) -> Rounding {
        match dtype {
            DType::F16 | DType::I8 | DType::I4 | DType::I8G => {
                Rounding::Gptq(GptqOptions::default())
            }
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

/// [`requantize_nearest`] with `rounding` for `f16` and integer matrices (`f32` has nothing to round),
/// stored and rounded as the [`Plan`] of `dtype` and `activations` says. GPTQ calibrates on `model`
/// itself, which should be the `f32` original.
pub fn requantize(
    model: &Model<'_>,
    dtype: DType,
    activations: Activations,
    rounding: &Rounding,
) -> Result<Vec<u8>> {
    requantize_with(model, Plan::of(dtype, activations), activations, rounding)
}

/// [`requantize`] with any `plan` (e.g. W8A16's `f16` lookup tables, [`Plan::with_tables`]).
pub fn requantize_with(
    model: &Model<'_>,
    plan: Plan,
    activations: Activations,
    rounding: &Rounding,
) -> Result<Vec<u8>> {
    let opts = match rounding {
        Rounding::Gptq(opts) if plan.matrices != DType::F32 => opts,
        _ => return requantize_nearest_with(model, plan, activations),
    };
    let seqs = opts.source.sequences(model)?;
    let tensors =
        compensation::compensated_tensors_with(model, plan, activations, &seqs, opts.against)?;
    write_blob(model, activations, &tensors)
}
