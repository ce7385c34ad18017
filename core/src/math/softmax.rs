//! Numerically stable softmax.

/// `e^x`: `libm::expf`, or micromath's approximation with the `fast-math` feature.
#[inline]
pub fn exp(x: f32) -> f32 {
    #[cfg(feature = "fast-math")]
    {
        micromath::F32Ext::exp(x)
    }
    #[cfg(not(feature = "fast-math"))]
    {
        libm::expf(x)
    }
}

/// In place: `x_i <- e^(x_i - max x) / sum_j e^(x_j - max x)`. An empty slice is left alone.
pub fn softmax(x: &mut [f32]) {
    let max = super::max_of(x.iter().copied(), f32::NEG_INFINITY);
    let mut sum = 0.0f32;
    for v in x.iter_mut() {
        *v = exp(*v - max);
        sum += *v;
    }
    x.iter_mut().for_each(|v| *v /= sum);
}
