//! Numerically stable softmax.

/// `e^x` of the MLP activations: the softmax's own exponential over the whole `f32` range
/// ([`super::exp::exp`]: within 1 ulp, the same bits on every target, cheaper than `libm::expf`), or
/// micromath's approximation with the `fast-math` feature.
#[inline]
pub fn exp(x: f32) -> f32 {
    #[cfg(feature = "fast-math")]
    {
        micromath::F32Ext::exp(x)
    }
    #[cfg(not(feature = "fast-math"))]
    {
        super::exp::exp(x)
    }
}

/// The second half of the softmax `x_i <- e^(x_i - max x) / sum_j e^(x_j - max x)` after
/// [`exp_shifted`]: `x_i <- x_i / sum`.
pub fn normalize(x: &mut [f32], sum: f32) {
    x.iter_mut().for_each(|v| *v /= sum);
}

/// `max x` as [`softmax`] takes it (`-inf` for an empty slice; NaNs ignored).
pub fn max(x: &[f32]) -> f32 {
    super::max_of(x.iter().copied(), f32::NEG_INFINITY)
}

/// The first half of the softmax: `x_i <- e^(x_i - max)` (`super::exp::exp`, or micromath's with
/// `fast-math`), returning `sum_i e^(x_i - max)` (added in order); dividing each `x_i` by that sum
/// finishes it, bit for bit.
pub fn exp_shifted(x: &mut [f32], max: f32) -> f32 {
    // The target's loop where it has one (assembly, or the host's SIMD), the same bits.
    if let Some(sum) = crate::arch::exp_shifted(x, max) {
        return sum;
    }
    exp_shifted_portable(x, max)
}

/// [`exp_shifted`] one value at a time.
#[inline(always)]
pub(crate) fn exp_shifted_portable(x: &mut [f32], max: f32) -> f32 {
    let mut sum = 0.0f32;
    for v in x.iter_mut() {
        #[cfg(feature = "fast-math")]
        let e = exp(*v - max);
        #[cfg(not(feature = "fast-math"))]
        let e = super::exp::exp(*v - max);
        *v = e;
        sum += e;
    }
    sum
}
