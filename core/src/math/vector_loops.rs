//! The norms' passes over whole groups of four values and the residual stream's adds: portable Rust
//! here; on cores with an FPU and the DSP instructions the same operations in the same order in
//! assembly (`dsp_vector.rs`), so the same bits. The norms' passes handle the first `len / 4 * 4`
//! values (the callers take the rest), `add` all of them.

#[cfg(fpu_asm)]
pub(crate) use super::dsp_vector::{add, centre4, divide4, sqrt, sum4};
#[cfg(not(fpu_asm))]
pub(crate) use portable::{add, centre4, divide4, sqrt, sum4};

#[allow(dead_code)]
mod portable {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Normalization;
    use crate::testing::lcg;
    use std::vec::Vec;

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn norm_and_adds_equal_one_value_at_a_time_with_any_tail() {
        let mut next = lcg(0x7ec_4001);
        for n in 0..40 {
            let src: Vec<f32> = (0..n)
                .map(|_| (next() >> 8) as f32 / 65_536.0 - 128.0)
                .collect();
            // LayerNorm as a plain loop: the mean's sum from -0, the centred copy with the squares'
            // sum, the square root, the division.
            let mean = src.iter().fold(-0.0f32, |t, &v| t + v) / n as f32;
            let mut want: Vec<f32> = src.iter().map(|&v| v - mean).collect();
            let sq = want.iter().fold(-0.0f32, |t, &v| t + v * v);
            let scale = libm::sqrtf(sq / n as f32 + 1e-5);
            want.iter_mut().for_each(|v| *v /= scale);
            let mut x = std::vec![7.0f32; n];
            let got_scale = crate::math::norm::scale(Normalization::LN, 1e-5, &src, &mut x);
            crate::math::norm::divide(Normalization::LN, got_scale, &mut x);
            if n > 0 {
                assert_eq!(got_scale.to_bits(), scale.to_bits(), "n {n}");
                assert_eq!(bits(&x), bits(&want), "n {n}");
            }
            // The residual add and a bias read from the blob's bytes, aligned or not.
            let mut acc: Vec<f32> = src.iter().map(|v| v * 0.5 - 1.0).collect();
            let want: Vec<f32> = acc.iter().zip(&src).map(|(a, s)| a + s).collect();
            crate::math::add(&mut acc, &src);
            assert_eq!(bits(&acc), bits(&want), "n {n}");
            let bytes: Vec<u8> = src.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut padded = std::vec![0u32; n + 1];
            let raw: &mut [u8] = bytemuck::cast_slice_mut(&mut padded);
            for shift in [0, 1] {
                raw[shift..shift + 4 * n].copy_from_slice(&bytes);
                let b = crate::weights::Vector::new(&raw[shift..shift + 4 * n]);
                let mut acc: Vec<f32> = src.iter().map(|v| v * 0.25).collect();
                let want: Vec<f32> = acc.iter().zip(&src).map(|(a, s)| a + s).collect();
                b.add_to(&mut acc);
                assert_eq!(bits(&acc), bits(&want), "n {n} shift {shift}");
            }
            assert_eq!(sqrt(2.0).to_bits(), libm::sqrtf(2.0).to_bits());
        }
    }
}
