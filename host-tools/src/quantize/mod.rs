//! Quantisers: `f32` matrices (blob layout, row-major) to `f16`, `i8` (symmetric, one scale per row) or
//! `i4` (symmetric, one scale per group of 32 along each row, two values per byte) blob tensors. The
//! rows go through the core's own encoders ([`microlens::encode`]), so the host rounds exactly as
//! the device does; the way back goes through the core's [`microlens::weights::Matrix`] reader.
//!
//! Integer weights are rounded to nearest, or with GPTQ ([`gptq`]): over the whole model
//! ([`compensation`]), each matrix against the inputs it sees on calibration sequences
//! ([`calibration`]) and the lookup tables (`W_E`, `W_pos`, `pos_Q`, `pos_K`) against the output
//! Fisher ([`tables`]). The layout and the scales' format are the same either way, so the device
//! maths is too. W8A16 couples each matrix's rows through its output Fisher and may keep the tables
//! in `f16` ([`plan`]).

pub mod calibration;
pub mod compensation;
mod decode;
pub mod encode;
mod footprint;
pub mod gptq;
pub mod integer;
mod nearest;
pub mod plan;
pub mod ranges;
mod requantize;
pub mod tables;

pub use calibration::CalibrationInputs;
pub use compensation::bias_of;
pub use decode::{decode_matrix, matrix_values};
pub use footprint::{footprints, Footprint};
pub use nearest::{encode_nearest, encoder_for, Quantizer};
pub use plan::Plan;
pub(crate) use requantize::nearest_tensor;
pub use requantize::{
    nearest_tensors, requantize, requantize_nearest, requantize_with, GptqOptions, Rounding,
};
