//! Scalar and vector maths shared by the components: norms, activations, softmax, rotary and sinusoidal
//! positions.
//! Transcendental functions come from `libm` (or `micromath` with `fast-math`), so every target computes
//! the same bits; the softmax's exponential is `exp.rs`, basic `f32` operations only, the same bits too.

pub(crate) mod activation;
#[cfg(all(dsp_fpu, not(feature = "fast-math")))]
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

/// `acc[i] += x[i]` as far as both go, four values per pass (the residual stream's adds: on the M4F
/// 21 instructions per four values instead of 24). Elementwise, so the same bits in any grouping.
#[inline]
pub(crate) fn add(acc: &mut [f32], x: &[f32]) {
    let mut done = 0;
    for (a, x) in acc.chunks_exact_mut(4).zip(x.chunks_exact(4)) {
        if let (Ok(a), Ok(x)) = (<&mut [f32; 4]>::try_from(a), <&[f32; 4]>::try_from(x)) {
            *a = [a[0] + x[0], a[1] + x[1], a[2] + x[2], a[3] + x[3]];
        }
        done += 4;
    }
    let (acc, x) = (
        acc.get_mut(done..).unwrap_or(&mut []),
        x.get(done..).unwrap_or(&[]),
    );
    acc.iter_mut().zip(x).for_each(|(a, x)| *a += x);
}
