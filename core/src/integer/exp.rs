//! `e^x` for `x <= 0` in fixed point: input Q11 (`x / 2^11`, so `[-16, 0]` in an `i16`), output Q30
//! (`e^0 = 2^30` exactly). With `n = -x = 256 h + l`, `e^x = e^(-h / 8) e^(-l / 2^11)`: two table
//! lookups (128 entries in Q30, 256 in Q31, 1.5 KB of flash) and one rounded wide product. Worst
//! error over every `i16` input: 1.03 units of `2^-30` (relative error below `1.2e-8` where
//! `e^x >= 2^-4`), measured by the tests against `f64` `exp`.
//!
//! The tables are computed at compile time in integers (Taylor series in 64-bit fixed point on
//! `u128`), so every target holds the same bytes.

/// Fraction bits of the input.
pub const INPUT_FRAC_BITS: u32 = 11;
/// Fraction bits of the output.
pub const OUTPUT_FRAC_BITS: u32 = 30;
/// `1.0` in the output's Q30.
pub const ONE: i32 = 1 << OUTPUT_FRAC_BITS;

/// Bits of `n = -x` the low table covers.
const LOW_BITS: u32 = 8;
/// `e^(-h 2^8 / 2^11) = e^(-h / 8)` in Q30, rounded, for `h = 0..128`.
static HIGH: [u32; 128] = table::high();
/// `e^(-l / 2^11)` in Q31, rounded, for `l = 0..256`.
static LOW: [u32; 256] = table::low();

/// `e^(x / 2^11) * 2^30`, rounded (within 1.03, see the module); `x > 0` saturates to `e^0`, and `x`
/// below `-32767` is taken as `-32767` (`e^-16 * 2^30 = 120`).
pub fn exp_q(x: i16) -> i32 {
    // n = -x in 0..=32767.
    let n = (-i32::from(x.max(-i16::MAX))).max(0) as u32;
    let high = HIGH[(n >> LOW_BITS) as usize & 127];
    let low = LOW[(n & ((1 << LOW_BITS) - 1)) as usize];
    // Q30 x Q31 = Q61 (below 2^61 + 1), rounded to Q30: at most 2^30.
    ((crate::arch::mul_wide_u(high, low) + (1 << 30)) >> 31) as i32
}

/// The tables, in integers at compile time.
mod table {
    /// `1.0` in the working format, Q64 on `u128`.
    const ONE_Q64: u128 = 1 << 64;

    /// `e^(-n / 2^11)` in Q64 for `n <= 2^8` (`x <= 1/8`): the alternating Taylor series to the 16th
    /// term (the next below `2^-64`), each term truncated.
    const fn exp_neg_q64(n: u32) -> u128 {
        let x = (n as u128) << (64 - super::INPUT_FRAC_BITS);
        let (mut term, mut sum, mut k) = (ONE_Q64, ONE_Q64 as i128, 1u128);
        while k <= 16 {
            // term <= 2^64 and x <= 2^61: the product fits.
            term = ((term * x) >> 64) / k;
            sum += if k % 2 == 1 {
                -(term as i128)
            } else {
                term as i128
            };
            k += 1;
        }
        sum as u128
    }

    /// `v` in Q64 rounded to `bits` fraction bits.
    const fn round(v: u128, bits: u32) -> u32 {
        ((v + (1 << (63 - bits))) >> (64 - bits)) as u32
    }

    /// `e^(-h / 8)` in Q30 for `h = 0..128`: powers of `e^(-1/8)` in Q64, each product rounded.
    pub(super) const fn high() -> [u32; 128] {
        let base = exp_neg_q64(1 << super::LOW_BITS);
        let (mut out, mut acc, mut h) = ([0u32; 128], ONE_Q64, 0);
        while h < 128 {
            out[h] = round(acc, super::OUTPUT_FRAC_BITS);
            acc = (acc * base + (1 << 63)) >> 64;
            h += 1;
        }
        out
    }

    /// `e^(-l / 2^11)` in Q31 for `l = 0..256`.
    pub(super) const fn low() -> [u32; 256] {
        let (mut out, mut l) = ([0u32; 256], 0);
        while l < 256 {
            out[l] = round(exp_neg_q64(l as u32), super::OUTPUT_FRAC_BITS + 1);
            l += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `i16` input, against `f64`: the worst absolute error in units of `2^-30`.
    #[test]
    fn every_i16_input_within_1_03_units_of_2_pow_minus_30() {
        let mut worst = 0f64;
        let mut worst_rel = 0f64;
        for x in i16::MIN..=i16::MAX {
            let real = libm::exp(f64::from(x.clamp(-i16::MAX, 0)) / 2048.0);
            let want = real * f64::from(ONE);
            let got = f64::from(exp_q(x));
            let err = (got - want).abs();
            worst = worst.max(err);
            if real >= 1.0 / 16.0 {
                worst_rel = worst_rel.max(err / want);
            }
        }
        assert!(worst <= 1.03, "worst {worst} units");
        assert!(worst_rel < 1.2e-8, "worst relative {worst_rel:e}");
        assert_eq!(exp_q(0), ONE);
        assert_eq!(exp_q(i16::MAX), ONE);
        assert_eq!(exp_q(i16::MIN), exp_q(-i16::MAX));
    }

    #[test]
    fn monotonic() {
        let mut prev = 0;
        for x in -i16::MAX..=0 {
            let e = exp_q(x);
            assert!(e >= prev, "{x}");
            prev = e;
        }
    }
}
