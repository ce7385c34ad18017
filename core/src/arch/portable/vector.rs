//! The norms' passes over whole groups of four values and the residual stream's adds in plain Rust
//! (cores with an FPU and the DSP instructions run the same operations in the same order in assembly,
//! `armv7em/vector.rs`). The norms' passes handle the first `len / 4 * 4` values (the callers take the
//! rest), `add` all of them.

/// `t + x[0] + x[1] + ...` left to right over the first `x.len() / 4 * 4` values.
#[inline(always)]
pub(crate) fn sum4(x: &[f32], t: f32) -> f32 {
    x.chunks_exact(4)
        .fold(t, |t, q| q.iter().fold(t, |t, &v| t + v))
}

/// `x[i] = src[i] - mean` and `sq += x[i] * x[i]` in order over the first `min(x.len(),
/// src.len()) / 4 * 4` values; returns `sq`.
#[inline(always)]
pub(crate) fn centre4(x: &mut [f32], src: &[f32], mean: f32, mut sq: f32) -> f32 {
    let mut f = |v: &mut f32, s: f32| {
        *v = s - mean;
        sq += *v * *v;
    };
    for (d, s) in x.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
        if let ([d0, d1, d2, d3], &[s0, s1, s2, s3]) = (d, s) {
            f(d0, s0);
            f(d1, s1);
            f(d2, s2);
            f(d3, s3);
        }
    }
    sq
}

/// `x[i] /= scale` over the first `x.len() / 4 * 4` values.
#[inline(always)]
pub(crate) fn divide4(x: &mut [f32], scale: f32) {
    for q in x.chunks_exact_mut(4) {
        if let [a, b, c, d] = q {
            *a /= scale;
            *b /= scale;
            *c /= scale;
            *d /= scale;
        }
    }
}

/// `acc[i] += x[i]` as far as both go, four values per pass, then the rest.
#[inline(always)]
pub(crate) fn add(acc: &mut [f32], x: &[f32]) {
    let n = acc.len().min(x.len());
    let (acc, x) = (&mut acc[..n], &x[..n]);
    for (a, x) in acc.chunks_exact_mut(4).zip(x.chunks_exact(4)) {
        if let (Ok(a), Ok(x)) = (<&mut [f32; 4]>::try_from(a), <&[f32; 4]>::try_from(x)) {
            *a = [a[0] + x[0], a[1] + x[1], a[2] + x[2], a[3] + x[3]];
        }
    }
    let done = n - n % 4;
    acc[done..]
        .iter_mut()
        .zip(&x[done..])
        .for_each(|(a, x)| *a += x);
}

/// `sqrt(x)`, correctly rounded.
#[inline(always)]
pub(crate) fn sqrt(x: f32) -> f32 {
    libm::sqrtf(x)
}
