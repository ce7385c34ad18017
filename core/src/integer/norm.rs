//! LayerNorm and RMSNorm of an integer vector, without their gain and bias (which fold into the next
//! requantisation): `y_i = (x_i - mean) / sqrt(var + eps)` (RMSNorm: no mean) in Q11, saturated to an
//! `i16` (so `|y| < 16`, enough for widths to 256). Exactly in integers: with `D_i = n x_i - sum(x)`
//! (RMSNorm `n x_i`), `y_i = D_i / sqrt(sum(D^2) / n + n^2 eps)`; the root by [`isqrt`] on at least 31
//! significant bits, its [`reciprocal`], one rounding per output. Worst error: 0.5 units of `2^-11`
//! plus `2^-20`, measured by the tests against `f64`.

use super::reciprocal::reciprocal;
use super::requantize::round_shift_wide;
use super::sqrt::isqrt;

/// Fraction bits of the output.
pub const OUTPUT_FRAC_BITS: u32 = 11;
/// The widest vector: `sum(D^2)` stays below `2^63` for `i16` inputs.
pub const MAX_WIDTH: usize = 1024;

/// Normalises `x` into `out` (the shorter length): centred (LayerNorm) or not (RMSNorm). `eps_n2` is
/// `n^2 eps / s^2` rounded, for the input's scale `s`. `None` (and `out` untouched) for an empty or wider
/// than [`MAX_WIDTH`] vector; all zeros when the variance and `eps` are both 0.
pub fn normalize(x: &[i16], centre: bool, eps_n2: u64, out: &mut [i16]) -> Option<()> {
    let n = x.len().min(out.len());
    if n == 0 || n > MAX_WIDTH {
        return None;
    }
    let x = &x[..n];
    let width = n as i32;
    let sum: i32 = if centre {
        x.iter().map(|&v| i32::from(v)).sum()
    } else {
        0
    };
    let d = |v: i16| width * i32::from(v) - sum;
    // |D| < 2^26 (n <= 2^10, |x - mean| < 2^16): an i32; D^2 < 2^52, n of them < 2^62.
    let squares: u64 = x
        .iter()
        .map(|&v| crate::arch::mul_wide_u(d(v).unsigned_abs(), d(v).unsigned_abs()))
        .sum();
    let q = (squares / n as u64).saturating_add(eps_n2);
    if q == 0 {
        out[..n].fill(0);
        return Some(());
    }
    // sqrt(q) on 32 bits: q 4^k in [2^62, 2^64), its root 2^k sqrt(q) in [2^31, 2^32).
    let k = q.leading_zeros() / 2;
    let (m, e) = reciprocal(u64::from(isqrt(q << (2 * k))))?;
    // y = D m 2^k / 2^e in Q11: |D m| < 2^57, shift e - k - 11 = 51 - k in 19..=51.
    let shift = e.saturating_sub(k + OUTPUT_FRAC_BITS);
    for (o, &v) in out.iter_mut().zip(x) {
        let p = i64::from(d(v)) * i64::from(m);
        let y = match shift {
            1..=62 => round_shift_wide(p, shift),
            _ => p,
        };
        *o = y.clamp(i16::MIN.into(), i16::MAX.into()) as i16;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::wide;

    fn reference(x: &[i16], centre: bool, eps_n2: u64) -> std::vec::Vec<f64> {
        let n = x.len() as f64;
        let mean = if centre {
            x.iter().map(|&v| f64::from(v)).sum::<f64>() / n
        } else {
            0.0
        };
        let var = x
            .iter()
            .map(|&v| (f64::from(v) - mean).powi(2))
            .sum::<f64>()
            / n;
        let eps = eps_n2 as f64 / (n * n);
        x.iter()
            .map(|&v| (f64::from(v) - mean) / libm::sqrt(var + eps))
            .collect()
    }

    /// Widths 1 to 256 (and 1024), spreads from 1 to the whole `i16` range, with and without `eps`.
    #[test]
    fn within_half_a_unit_of_q11() {
        let mut next = wide(crate::testing::lcg(11));
        let mut worst = 0f64;
        let widths = (1..=256usize).chain([1024]);
        for n in widths {
            for spread in [2u64, 17, 300, 5000, 65_536] {
                let x: std::vec::Vec<i16> = (0..n)
                    .map(|_| match spread {
                        65_536 => next() as i16,
                        s => ((next() % s) as i64 - (s / 3) as i64) as i16,
                    })
                    .collect();
                for centre in [true, false] {
                    for eps_n2 in [0, 1, (n * n) as u64 * 1000] {
                        let mut out = std::vec![0i16; n];
                        normalize(&x, centre, eps_n2, &mut out).unwrap();
                        for (y, want) in out.iter().zip(reference(&x, centre, eps_n2)) {
                            let want = want * 2048.0;
                            if !want.is_finite() || want.abs() >= 32767.0 {
                                assert!(want.is_nan() || i32::from(*y).abs() >= 32767 || *y == 0);
                                continue;
                            }
                            worst = worst.max((f64::from(*y) - want).abs());
                        }
                    }
                }
            }
        }
        let bound = 0.5 + 2048.0 * libm::exp2(-20.0);
        assert!(worst <= bound, "worst {worst} units of 2^-11 > {bound}");
    }

    #[test]
    fn edges() {
        let mut out = [5i16; 4];
        assert_eq!(normalize(&[], true, 1, &mut out), None);
        assert_eq!(normalize(&[0; 2000], true, 1, &mut [0; 2000]), None);
        normalize(&[3, 3, 3, 3], true, 0, &mut out).unwrap();
        assert_eq!(out, [0; 4]);
        // +-1 around the mean: exactly +-1.0.
        normalize(&[1, -1, 1, -1], true, 0, &mut out).unwrap();
        assert_eq!(out, [2048, -2048, 2048, -2048]);
    }
}
