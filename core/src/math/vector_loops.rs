//! The norms' passes over whole groups of four values and the residual stream's adds: portable Rust
//! or, on cores with an FPU and the DSP instructions, the same operations in the same order in
//! assembly, through the kernels' facade (`crate::arch`), so the same bits. The norms' passes handle the first `len / 4 * 4`
//! values (the callers take the rest), `add` all of them.

pub(crate) use crate::arch::{add, centre4, divide4, sqrt, sum4};

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
