//! Softmax of a row of scores in integers: scores in Q11 (`i32`: `x * 2^11`, any range; only the
//! differences from the row's maximum, saturated to [`exp_q`]'s `[-16, 0]`, matter), probabilities in Q15
//! (`p * 2^15`, so `1.0 = 32768` in a `u16`). `e^(x_i - max)` in Q30 summed exactly in a `u64`, its
//! [`reciprocal`] once per row, then each `e^(x_i - max)` (recomputed, no scratch) times it. Worst error
//! per probability: 0.5 units of `2^-15` plus `2^-24` (the output's rounding plus the exponential's and
//! the reciprocal's errors), measured by the tests against `f64`.

use super::exp::exp_q;
use super::reciprocal::reciprocal;
use super::requantize::round_shift_wide;

/// Fraction bits of the probabilities.
pub const PROB_FRAC_BITS: u32 = 15;

/// `out[i] = round(2^15 softmax(x / 2^11)[i])` for `i` up to the shorter length. Differences from the
/// row's maximum below `-16` (in real units) count as `-16` ([`exp_q`]).
pub fn softmax(x: &[i32], out: &mut [u16]) {
    let n = x.len().min(out.len());
    let x = &x[..n];
    let Some(max) = x.iter().copied().max() else {
        return;
    };
    let sum = x.iter().fold(0u64, |s, &v| s + exp(max, v) as u64);
    if let Some(row) = Reciprocal::of(sum) {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = row.prob(exp(max, v)) as u16;
        }
    }
}

/// [`softmax`] in place, each score replaced by its probability in Q15: the exponentials computed once
/// and kept in `x` between the sum and the division.
pub fn softmax_in_place(x: &mut [i32]) {
    let Some(max) = x.iter().copied().max() else {
        return;
    };
    let mut sum = 0u64;
    for v in x.iter_mut() {
        *v = exp(max, *v);
        sum += *v as u64;
    }
    if let Some(row) = Reciprocal::of(sum) {
        for v in x.iter_mut() {
            *v = row.prob(*v) as i32;
        }
    }
}

/// `e^(v - max)` in Q30 of a score of a row whose maximum is `max` (at least 0, at most `2^30`).
#[inline(always)]
fn exp(max: i32, v: i32) -> i32 {
    exp_q(v.saturating_sub(max).max(i32::from(i16::MIN)) as i16)
}

/// The reciprocal of a row's sum of exponentials, as a multiplier and the shift to Q15.
struct Reciprocal {
    m: u32,
    shift: u32,
}

impl Reciprocal {
    /// For a row whose exponentials sum to `sum` (at most `2^30` per score, so no `u64` overflow for
    /// any row a slice holds), `None` for 0.
    fn of(sum: u64) -> Option<Self> {
        // sum >= 2^30 (the maximum's own term) for a row with scores.
        let (m, e) = reciprocal(sum)?;
        // p = E / sum = E m / 2^e with E the Q30 exponential: Q15 after a shift by e - 15, at least
        // 46 (e >= 61). E m < 2^61, so a shift beyond 62 leaves 0.
        Some(Reciprocal {
            m,
            shift: e.saturating_sub(PROB_FRAC_BITS),
        })
    }

    /// The probability in Q15 (at most `2^15`) of a score whose exponential is `e` (Q30, `0..=2^30`).
    #[inline(always)]
    fn prob(&self, e: i32) -> u32 {
        let p = match self.shift {
            // e m < 2^62: e <= 2^30 (the exponential), m <= 2^31 (the reciprocal).
            1..=62 => {
                round_shift_wide(crate::arch::mul_wide_u(e as u32, self.m) as i64, self.shift)
            }
            _ => 0,
        };
        p.clamp(0, 1 << PROB_FRAC_BITS) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probability_is_the_rounded_wide_product() {
        let mut next = wide(crate::testing::lcg(31));
        for shift in 0..=64u32 {
            for i in 0..2_000u64 {
                let e = match i {
                    0 => 0,
                    1 => 1 << 30,
                    _ => (next() % (1 << 30)) as i32,
                };
                let m = (1 << 30) + (next() % (1 << 30) + 1) as u32;
                let want = match shift {
                    1..=62 => {
                        ((u128::from(e as u32) * u128::from(m) + (1 << (shift - 1))) >> shift)
                            .min(1 << PROB_FRAC_BITS) as u32
                    }
                    _ => 0,
                };
                assert_eq!(Reciprocal { m, shift }.prob(e), want, "{e} {m} {shift}");
            }
        }
    }
    use crate::testing::wide;

    fn reference(x: &[i32]) -> std::vec::Vec<f64> {
        let max = x.iter().copied().max().unwrap();
        let e: std::vec::Vec<f64> = x
            .iter()
            .map(|&v| libm::exp((f64::from(v) - f64::from(max)).max(-32767.0) / 2048.0))
            .collect();
        let sum: f64 = e.iter().sum();
        e.iter().map(|v| v / sum).collect()
    }

    /// Rows of every length to 300 with spreads from 0 to beyond the exponential's range, plus the
    /// extremes: worst error 0.5 units of Q15 plus `2^-24`.
    #[test]
    fn within_half_a_unit_of_q15() {
        let mut next = wide(crate::testing::lcg(29));
        let mut worst = 0f64;
        let mut rows: std::vec::Vec<std::vec::Vec<i32>> = std::vec::Vec::new();
        for n in 1..=300usize {
            for spread in [0u64, 1, 64, 2048, 8192, 65_536, 1 << 32] {
                rows.push(
                    (0..n)
                        .map(|_| match spread {
                            0 => 7,
                            s => (next() % s) as i64 - (s / 2) as i64,
                        } as i32)
                        .collect(),
                );
            }
        }
        rows.push(std::vec![i32::MIN, i32::MAX]);
        rows.push(std::vec![i32::MAX; 257]);
        for x in &rows {
            let mut out = std::vec![0u16; x.len()];
            softmax(x, &mut out);
            for (p, want) in out.iter().zip(reference(x)) {
                let err = (f64::from(*p) / 32768.0 - want).abs();
                worst = worst.max(err);
            }
        }
        let bound = 0.5 / 32768.0 + libm::exp2(-24.0);
        assert!(worst <= bound, "worst {worst:e} > {bound:e}");
        assert!(
            worst > 0.25 / 32768.0,
            "the output's rounding is visible: {worst:e}"
        );
    }

    #[test]
    fn edges() {
        let mut out = [9u16; 3];
        softmax(&[], &mut out);
        assert_eq!(out, [9; 3]);
        softmax(&[5], &mut out);
        assert_eq!(out[0], 32768);
        softmax(&[0, 0], &mut out);
        assert_eq!(out, [16384, 16384, 9]);
    }

    #[test]
    fn in_place_equals_the_two_buffers() {
        let mut next = crate::testing::lcg(11);
        for n in [1usize, 2, 7, 64, 300] {
            let x: std::vec::Vec<i32> = (0..n).map(|_| (next() % 80_000) as i32 - 40_000).collect();
            let mut out = std::vec![0u16; n];
            softmax(&x, &mut out);
            let mut y = x.clone();
            softmax_in_place(&mut y);
            assert!(y.iter().zip(&out).all(|(&a, &b)| a == i32::from(b)), "{n}");
        }
    }
}
