//! LayerNorm and RMSNorm, in TransformerLens 2.x's order of operations and hook placement.
//!
//! Each pass walks its vector four values at a time (whole groups, `math/vector_loops.rs`: in
//! assembly on cores with an FPU, then the rest), in order: the same sums and roundings as a plain
//! loop.

use super::vector_loops;
use crate::config::Normalization;

/// `x = src` (over the shorter length), centred (LN only), and `scale = sqrt(mean(x^2) + eps)`: the
/// mean's sum over `src`, then the copy centred with the squares' sum, one pass each (RMSNorm
/// subtracts 0, which leaves every value as it is). Returns `scale`, or 1 for no norm or an empty
/// vector (then `x` is only the copy).
pub fn scale(norm: Normalization, eps: f32, src: &[f32], x: &mut [f32]) -> f32 {
    let len = x.len().min(src.len());
    let (x, src) = (&mut x[..len], &src[..len]);
    if !norm.is_some() || len == 0 {
        x.copy_from_slice(src);
        return 1.0;
    }
    let n = len as f32;
    let mean = match norm.centers() {
        true => sum(src) / n,
        false => 0.0,
    };
    let done = len - len % 4;
    let mut sq = vector_loops::centre4(x, src, mean, -0.0);
    for (v, s) in x[done..].iter_mut().zip(&src[done..]) {
        *v = s - mean;
        sq += *v * *v;
    }
    vector_loops::sqrt(sq / n + eps)
}

/// `x[0] + x[1] + ...` left to right from -0 (`Iterator::sum`'s start, so that an all-negative-zero
/// vector sums to -0), four values per loop test.
#[inline(always)]
fn sum(x: &[f32]) -> f32 {
    let total = vector_loops::sum4(x, -0.0);
    x[x.len() - x.len() % 4..].iter().fold(total, |t, &v| t + v)
}

/// In place: `x / scale` (nothing for no norm).
pub fn divide(norm: Normalization, scale: f32, x: &mut [f32]) {
    if norm.is_some() {
        vector_loops::divide4(x, scale);
        let done = x.len() - x.len() % 4;
        x[done..].iter_mut().for_each(|v| *v /= scale);
    }
}
