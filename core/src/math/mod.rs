//! Scalar and vector maths shared by the components: norms, activations, softmax, rotary and sinusoidal
//! positions.
//! Transcendental functions come from `libm` (or `micromath` with `fast-math`), so every target computes
//! the same bits; the softmax's exponential is `exp.rs`, basic `f32` operations only, the same bits too.

pub(crate) mod activation;
#[cfg(all(
    feature = "dsp",
    not(feature = "mve"),
    not(feature = "fast-math"),
    target_arch = "arm",
    target_abi = "eabihf"
))]
mod dsp_exp;
#[cfg(not(feature = "fast-math"))]
pub(crate) mod exp;
pub mod norm;
pub(crate) mod rotary;
pub(crate) mod rows;
pub mod sinusoidal;
pub(crate) mod softmax;

/// The largest of `values` and `init`, NaNs ignored: `values.fold(init, f32::max)` as comparisons
/// (`f32::max` is a library call on cores without `VMAXNM`). Only the sign of a zero maximum may differ,
/// which no caller can observe (they subtract it or divide by it after `fabs`).
#[inline]
pub(crate) fn max_of(values: impl Iterator<Item = f32>, init: f32) -> f32 {
    values.fold(init, |m, v| if v > m { v } else { m })
}
