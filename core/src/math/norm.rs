//! LayerNorm and RMSNorm, in TransformerLens 2.x's order of operations and hook placement.
//!
//! Each pass walks its vector four values at a time (whole groups, then the rest), in order: the
//! same sums and roundings as a plain loop, with a group loaded and stored by one instruction where
//! the target has them (`VLDMIA`/`VSTMIA`).

use crate::config::Normalization;
use crate::weights::Vector;

/// `f(dst[i], src[i])` for every `i` of the shorter slice, in order, four at a time.
#[inline(always)]
pub(crate) fn each4(dst: &mut [f32], src: &[f32], mut f: impl FnMut(&mut f32, f32)) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    let (mut d4, s4) = (dst.chunks_exact_mut(4), src.chunks_exact(4));
    let rest = s4.remainder();
    for (d, s) in (&mut d4).zip(s4) {
        if let ([d0, d1, d2, d3], &[s0, s1, s2, s3]) = (d, s) {
            f(d0, s0);
            f(d1, s1);
            f(d2, s2);
            f(d3, s3);
        }
    }
    for (d, &s) in d4.into_remainder().iter_mut().zip(rest) {
        f(d, s);
    }
}

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
    let mut sq = -0.0f32;
    each4(x, src, |v, s| {
        *v = s - mean;
        sq += *v * *v;
    });
    libm::sqrtf(sq / n + eps)
}

/// `x[0] + x[1] + ...` left to right from -0 (`Iterator::sum`'s start, so that an all-negative-zero
/// vector sums to -0), four values per loop test.
#[inline(always)]
fn sum(x: &[f32]) -> f32 {
    let x4 = x.chunks_exact(4);
    let rest = x4.remainder();
    let total = x4.fold(-0.0f32, |t, q| q.iter().fold(t, |t, &v| t + v));
    rest.iter().fold(total, |t, &v| t + v)
}

/// In place: `x / scale` (nothing for no norm).
pub fn divide(norm: Normalization, scale: f32, x: &mut [f32]) {
    if norm.is_some() {
        each4_mut(x, |v| *v /= scale);
    }
}

/// `f(x[i])` for every `i`, in order, four at a time.
#[inline(always)]
fn each4_mut(x: &mut [f32], mut f: impl FnMut(&mut f32)) {
    let mut x4 = x.chunks_exact_mut(4);
    for q in &mut x4 {
        if let [a, b, c, d] = q {
            f(a);
            f(b);
            f(c);
            f(d);
        }
    }
    x4.into_remainder().iter_mut().for_each(f);
}

/// In place: `x * w (+ b)`, for the norms that have parameters.
pub fn affine(w: Option<Vector<'_>>, b: Option<Vector<'_>>, x: &mut [f32]) {
    if let Some(w) = w {
        x.iter_mut().zip(w.iter()).for_each(|(v, w)| *v *= w);
    }
    if let Some(b) = b {
        b.add_to(x);
    }
}
