//! Softmax of a row of scores in integers: scores in Q11 (`i32`: `x * 2^11`, any range; only the
//! differences from the row's maximum, saturated to [`exp_q`]'s `[-16, 0]`, matter), probabilities in Q15
//! (`p * 2^15`, so `1.0 = 32768` in a `u16`). `e^(x_i - max)` in Q30 summed exactly in a `u64`, its
//! [`reciprocal`] once per row, then each `e^(x_i - max)` (recomputed, no scratch) times it. Worst error
//! per probability: 0.5 units of `2^-15` plus `2^-24` (the output's rounding plus the exponential's and
//! the reciprocal's errors), measured by the tests against `f64`.

use super::exp::exp_q;
use super::reciprocal::reciprocal;

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
    let shifted = |v: i32| exp_q(v.saturating_sub(max).max(i32::from(i16::MIN)) as i16);
    let sum = x
        .iter()
        .fold(0u64, |s, &v| s.saturating_add(shifted(v) as u64));
    // sum >= 2^30 (the maximum's own term), so never 0.
    let Some((m, e)) = reciprocal(sum) else {
        return;
    };
    // p = e^(x_i - max) / sum = E m / 2^e with E the Q30 exponential: Q15 after a shift by e - 15,
    // at least 46 (e >= 61). E m < 2^61, so a shift beyond 62 leaves 0.
    let shift = e.saturating_sub(PROB_FRAC_BITS);
    for (o, &v) in out.iter_mut().zip(x) {
        let p = match shift {
            1..=62 => (shifted(v) as u64 * u64::from(m) + (1 << (shift - 1))) >> shift,
            _ => 0,
        };
        *o = p.min(1 << PROB_FRAC_BITS) as u16;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
}
