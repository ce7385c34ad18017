//! Scalar and vector maths shared by the components: norms, activations, softmax, rotary and sinusoidal
//! positions.
//! Transcendental functions come from `libm` (or `micromath` with `fast-math`), so every target computes
//! the same bits; the softmax's exponential is `exp.rs`, basic `f32` operations only, the same bits too.

pub(crate) mod activation;
#[cfg(not(feature = "fast-math"))]
pub(crate) mod exp;
pub mod norm;
pub(crate) mod rotary;
pub(crate) mod rows;
pub mod sinusoidal;
pub(crate) mod softmax;
pub(crate) mod vector_loops;

/// The largest of `values` and `init`, NaNs ignored: `values.fold(init, f32::max)` as comparisons
/// (`f32::max` is a library call on cores without `VMAXNM`). Only the sign of a zero maximum may differ,
/// which no caller can observe (they subtract it or divide by it after `fabs`).
#[inline]
pub(crate) fn max_of(values: impl Iterator<Item = f32>, init: f32) -> f32 {
    values.fold(init, |m, v| if v > m { v } else { m })
}

/// `acc[i] += x[i]` as far as both go, four values per pass ([`vector_loops::add`]: on the M4F 9
/// instructions per four values in assembly). Elementwise, so the same bits in any grouping.
#[inline]
pub(crate) fn add(acc: &mut [f32], x: &[f32]) {
    vector_loops::add(acc, x);
}
