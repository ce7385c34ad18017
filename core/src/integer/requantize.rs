//! Requantisation by a fixed-point multiplier and a shift: `x * real ~ x * m * 2^(shift - 31)`, with
//! `m` in `[2^30, 2^31)` (TFLite's `MultiplyByQuantizedMultiplier`): a rounding doubling high multiply,
//! then a rounding right shift (halves away from zero).

/// `round(a * b / 2^31)` (halves up, towards `+inf`), saturated: only `a = b = i32::MIN` overflows,
/// and gives `i32::MAX` (gemmlowp's `SaturatingRoundingDoublingHighMul`). Exact.
#[inline]
pub fn rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    // gemmlowp's `(ab + nudge) / 2^31` with the nudge `2^30` (`ab >= 0`) or `1 - 2^30`, truncated
    // towards zero, is `floor((ab + 2^30) / 2^31)` for either sign: one shift. It fits an `i32` except
    // for the case above.
    ((crate::arch::mul_wide(a, b) + (1 << 30)) >> 31) as i32
}

/// `round(x / 2^exponent)`, halves away from zero; `exponent` is clamped to 31. Exact.
#[inline]
pub fn rounding_shift_right(x: i32, exponent: u32) -> i32 {
    let e = exponent.min(31);
    let mask = ((1u32 << e) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i32::from(x < 0);
    (x >> e) + i32::from(remainder > threshold)
}

/// `(p + 2^(s-1)) >> s`, i.e. `floor(p / 2^s + 1/2)`, for `s` in `1..=62` and `|p| < 2^62`. Where
/// `s >= 33` the low word cannot reach the result, so only the high word is shifted: one 32-bit
/// operation instead of a 64-bit shift by a variable amount. Exact.
#[inline(always)]
pub fn round_shift_wide(p: i64, s: u32) -> i64 {
    if s >= 33 {
        // p = hi 2^32 + lo with 0 <= lo < 2^32: floor((hi + 2^(s-33) + lo / 2^32) / 2^(s-32)) drops lo.
        let hi = (p >> 32) as i32;
        i64::from((hi + (1 << (s - 33))) >> (s - 32))
    } else {
        (p + (1 << (s - 1))) >> s
    }
}

/// A positive real factor as `m * 2^(shift - 31)`, `m` in `[2^30, 2^31)` (or `m = 0` for a factor
/// below `2^-32`), `shift` in `-31..=30`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Multiplier {
    /// The Q31 mantissa.
    pub m: i32,
    /// The power of two: left shift if positive, right shift if negative.
    pub shift: i32,
}

impl Multiplier {
    /// The multiplier nearest `real` (relative error at most `2^-31`), `None` unless `real` is finite,
    /// non-negative and below `2^30`. Computed on the host at conversion; the same bits everywhere.
    pub fn from_real(real: f64) -> Option<Self> {
        if !real.is_finite() || real < 0.0 {
            return None;
        }
        if real == 0.0 {
            return Some(Self { m: 0, shift: 0 });
        }
        let (frac, exp) = libm::frexp(real);
        let mut q = libm::round(frac * 2_147_483_648.0) as i64;
        let mut shift = exp;
        if q == 1 << 31 {
            q /= 2;
            shift += 1;
        }
        if shift > 30 {
            return None;
        }
        if shift < -31 {
            return Some(Self { m: 0, shift: 0 });
        }
        Some(Self { m: q as i32, shift })
    }

    /// The multiplier of `real 2^e`.
    #[inline(always)]
    pub fn times_pow2(self, e: i32) -> Self {
        Multiplier {
            m: self.m,
            shift: self.shift.saturating_add(e),
        }
    }

    /// The real factor this multiplier stands for.
    pub fn real(self) -> f64 {
        f64::from(self.m) * libm::exp2(f64::from(self.shift) - 31.0)
    }

    /// `x * real`, rounded twice: `x 2^max(shift, 0)` (saturated), times `m / 2^31` rounded, then divided
    /// by `2^max(-shift, 0)` rounded. Within 1 of `round(x * real)` where the product fits an `i32` and
    /// `x 2^shift` does not saturate (so `1 * 0.25` gives 1: both roundings take the half up).
    #[inline(always)]
    pub fn apply(self, x: i32) -> i32 {
        if self.shift <= 0 {
            // A factor below 1, the usual case: no left shift.
            let right = self.shift.saturating_neg().min(31) as u32;
            return rounding_shift_right(rounding_doubling_high_mul(x, self.m), right);
        }
        let left = self.shift.clamp(0, 30) as u32;
        let right = self.shift.saturating_neg().clamp(0, 31) as u32;
        let shifted = x.saturating_mul(1 << left);
        rounding_shift_right(rounding_doubling_high_mul(shifted, self.m), right)
    }
}

/// `x` saturated to the int8 range.
#[inline]
pub fn saturate_i8(x: i32) -> i8 {
    x.clamp(i32::from(i8::MIN), i32::from(i8::MAX)) as i8
}

/// `x` saturated to the int16 range.
#[inline]
pub fn saturate_i16(x: i32) -> i16 {
    x.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `round(n / d)` with halves away from zero, exactly, in `i128`.
    fn round_div(n: i128, d: i128) -> i128 {
        let q = n.abs() * 2 + d;
        let r = q / (2 * d);
        if n < 0 {
            -r
        } else {
            r
        }
    }

    /// Every `i32` edge and a dense stride through the whole range.
    fn sample_i32() -> impl Iterator<Item = i32> {
        let edges = [i32::MIN, i32::MIN + 1, -1, 0, 1, i32::MAX - 1, i32::MAX];
        edges
            .into_iter()
            .chain((i32::MIN..=i32::MAX).step_by(65_521))
            .chain(-70_000..=70_000)
    }

    #[test]
    fn the_wide_rounding_shift_is_exact() {
        let mut next = crate::testing::wide(crate::testing::lcg(17));
        for s in 1..=62u32 {
            for i in 0..3_000u64 {
                let p = match i {
                    0 => (1 << 62) - 1,
                    1 => 1 - (1 << 62),
                    2 => 0,
                    3 => -1,
                    _ => (next() as i64) >> (2 + i % 60),
                };
                let want = (i128::from(p) + (1i128 << (s - 1))) >> s;
                assert_eq!(i128::from(round_shift_wide(p, s)), want, "{p} {s}");
            }
        }
    }

    #[test]
    fn doubling_high_mul_is_exact() {
        let bs = [
            i32::MIN,
            -1_518_500_250,
            -3,
            -1,
            0,
            1,
            7,
            1_073_741_824,
            i32::MAX,
        ];
        let mut checked = 0u32;
        for a in sample_i32() {
            for b in bs {
                let got = rounding_doubling_high_mul(a, b);
                let ab = i128::from(a) * i128::from(b);
                let want = (2 * ab + (1 << 31))
                    .div_euclid(1 << 32)
                    .min(i32::MAX as i128);
                assert_eq!(i128::from(got), want, "{a} * {b}");
                checked += 1;
            }
        }
        assert!(checked > 500_000);
    }

    #[test]
    fn shift_right_rounds_halves_away_from_zero() {
        for e in 0..=31u32 {
            for x in sample_i32() {
                let want = round_div(i128::from(x), 1i128 << e);
                assert_eq!(i128::from(rounding_shift_right(x, e)), want, "{x} >> {e}");
            }
        }
        // Clamped exponent: no panic, the shift of 31.
        assert_eq!(rounding_shift_right(-7, 40), rounding_shift_right(-7, 31));
    }

    #[test]
    fn multiplier_encodes_within_2_pow_minus_31() {
        let mut worst = 0f64;
        let mut real = 1e-9f64;
        while real < 1e9 {
            let q = Multiplier::from_real(real).unwrap();
            assert!((1 << 30..=i32::MAX).contains(&q.m), "{real}: {q:?}");
            worst = worst.max((q.real() - real).abs() / real);
            real *= 1.000_731;
        }
        assert!(worst <= libm::exp2(-31.0), "worst relative error {worst:e}");
        assert_eq!(
            Multiplier::from_real(0.0),
            Some(Multiplier { m: 0, shift: 0 })
        );
        assert_eq!(Multiplier::from_real(1e-12).map(|q| q.m), Some(0));
        assert_eq!(Multiplier::from_real(-1.0), None);
        assert_eq!(Multiplier::from_real(f64::NAN), None);
        assert_eq!(Multiplier::from_real(2e9), None);
        // 1 - 2^-33 rounds up to 2^31 and moves to the next power of two.
        let q = Multiplier::from_real(1.0 - libm::exp2(-33.0)).unwrap();
        assert_eq!((q.m, q.shift), (1 << 30, 1));
    }

    /// Worst error of `apply` over every `i16` input and a dense `i32` sample: 1 (two roundings, and the
    /// multiplier's `2^-31` error).
    #[test]
    fn apply_is_within_one_of_the_rounded_product() {
        let reals = [
            1e-6,
            3.7e-4,
            0.003_921_568_6,
            0.0123,
            0.25,
            0.499_999,
            0.5,
            0.7072,
            1.0,
            1.5,
            3.3,
            17.0,
            255.9,
            1000.0,
        ];
        let mut worst = 0i128;
        for real in reals {
            let q = Multiplier::from_real(real).unwrap();
            let inputs = (i32::from(i16::MIN)..=i32::from(i16::MAX)).chain(sample_i32());
            for x in inputs {
                let exact = f64::from(x) * real;
                if exact.abs() >= 2e9
                    || (f64::from(x) * libm::exp2(f64::from(q.shift))).abs() >= 2e9
                {
                    continue;
                }
                let want = libm::round(exact) as i128;
                let err = (i128::from(q.apply(x)) - want).abs();
                worst = worst.max(err);
            }
        }
        assert_eq!(worst, 1);
        // Saturation instead of overflow.
        let big = Multiplier::from_real(1000.0).unwrap();
        assert_eq!(big.apply(i32::MAX), big.apply(i32::MAX - 1));
    }

    #[test]
    fn saturation() {
        assert_eq!(saturate_i8(300), 127);
        assert_eq!(saturate_i8(-300), -128);
        assert_eq!(saturate_i8(-5), -5);
        assert_eq!(saturate_i16(70_000), i16::MAX);
        assert_eq!(saturate_i16(-70_000), i16::MIN);
    }

    #[test]
    fn any_stored_multiplier_applies_without_panicking() {
        // A plan is data: its multipliers may hold any words.
        for shift in [i32::MIN, -32, -31, 0, 30, 31, i32::MAX] {
            for m in [i32::MIN, -1, 0, 1, i32::MAX] {
                for x in [i32::MIN, -1, 0, 1, i32::MAX] {
                    let _ = Multiplier { m, shift }.apply(x);
                }
            }
        }
    }
}
