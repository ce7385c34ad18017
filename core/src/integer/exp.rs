//! `e^x` for `x <= 0` in fixed point: input Q11 (`x / 2^11`, so `[-16, 0]` in an `i16`), output Q30
//! (`e^0 = 2^30` exactly). `x = -(z ln 2) + r` with `z` the nearest integer and `|r| <= ln 2 / 2`, then
//! `e^r` by its degree-7 Taylor polynomial in Q30 (Horner, each product rounded), shifted right by `z`
//! with rounding. Worst error over every `i16` input: 5.7 units of `2^-30` (relative error
//! below `1.6e-8` where `e^x >= 2^-4`), measured by the tests against `f64` `exp`.

use super::requantize::rounding_shift_right;

/// Fraction bits of the input.
pub const INPUT_FRAC_BITS: u32 = 11;
/// Fraction bits of the output.
pub const OUTPUT_FRAC_BITS: u32 = 30;
/// `1.0` in the output's Q30.
pub const ONE: i32 = 1 << OUTPUT_FRAC_BITS;

/// `ln 2` in Q28 (the reduction's format), rounded.
const LN2_Q28: i64 = 186_065_279;
/// `2^26 / (2^11 ln 2)`, rounded: `nx * INV_LN2 >> 26` is `nx / (2^11 ln 2)` within 1.
const INV_LN2: u32 = 47_275;
/// `1 / k!` for `k = 0..=7` in Q30, rounded.
const INV_FACTORIAL: [i32; 8] = [
    1 << 30,
    1 << 30,
    1 << 29,
    178_956_971,
    44_739_243,
    8_947_849,
    1_491_308,
    213_044,
];

/// `round(a * b / 2^30)` of two Q30 values (halves up), whose result fits an `i32`: one wide multiply.
#[inline(always)]
fn mul_q30(a: i32, b: i32) -> i32 {
    let q = (crate::arch::mul_wide(a, b) + (1 << 29)) >> 30;
    // Every input's products fit (the exhaustive tests run with debug assertions).
    debug_assert!(i32::try_from(q).is_ok());
    q as i32
}

/// `e^(x / 2^11) * 2^30`, rounded (within 6, see the module); `x > 0` saturates to `e^0`, and `x` below
/// `-32767` is taken as `-32767` (`e^-16 * 2^30 = 120`).
pub fn exp_q(x: i16) -> i32 {
    // -x as Q11, then Q28 (fits a u32 for nx <= 32767).
    let nx = (-i32::from(x.max(-i16::MAX))).max(0) as u32;
    // z = round(nx / (2^11 ln 2)): the estimate, then exact correction of r into [-ln2/2, ln2/2].
    // z ln 2 and nx in Q28 overflow 32 bits, but r = z ln 2 - nx stays within one ln 2 of 0, so the
    // wrapping 32-bit difference is r exactly.
    let mut z = ((nx * INV_LN2 + (1 << 25)) >> 26) as i32;
    let ln2 = LN2_Q28 as i32;
    let mut r = (z as u32)
        .wrapping_mul(ln2 as u32)
        .wrapping_sub(nx << (28 - INPUT_FRAC_BITS)) as i32;
    while r > ln2 / 2 {
        r -= ln2;
        z -= 1;
    }
    while r < -ln2 / 2 {
        r += ln2;
        z += 1;
    }
    // e^x = e^r 2^-z with r = z ln 2 - nx now in Q30: |r| <= 2^30 ln 2 / 2 fits an i32, and so does
    // every partial sum of the polynomial (at most e^|r| 2^30 < 1.42 * 2^30).
    let r = r << 2;
    let mut t = INV_FACTORIAL[7];
    for c in INV_FACTORIAL[..7].iter().rev() {
        t = c + mul_q30(r, t);
    }
    // z in 0..=24.
    rounding_shift_right(t, z.clamp(0, 31) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `i16` input, against `f64`: the worst absolute error in units of `2^-30`.
    #[test]
    fn every_i16_input_within_6_units_of_2_pow_minus_30() {
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
        assert!(worst <= 6.0, "worst {worst} units");
        assert!(worst_rel < 1.6e-8, "worst relative {worst_rel:e}");
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
