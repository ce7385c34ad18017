//! The softmax's exponential: `e^x` for the scores' `x - max <= 0`, cheaper than `libm::expf` and the
//! same bits on every target.
//!
//! `x = k ln 2 + r` (`k` rounded with the `1.5 * 2^23` trick, `r` by a two-constant Cody-Waite split),
//! `e^r` by a degree-6 polynomial on `|r| <= ln 2 / 2`, then `2^k` added to the exponent bits. Only
//! IEEE basic `f32` operations in a fixed order (no fused multiply-add, no float-integer conversion),
//! so x86, every Cortex-M with or without an FPU and RISC-V compute the same bits; the host's
//! eight-lane copy (`arch/host/exp.rs`) is these functions per lane. Within 1 ulp of `e^x` on every `f32`
//! (the tests measure it against `f64`); `e^0 = 1` exactly; subnormal results are correctly rounded
//! from `e^r` and `-inf` gives 0. On a Cortex-M4F the softmax's loop takes 31 instructions per score
//! with it, 50 with `libm::expf` (docs/device-speed.md).

/// `1 / ln 2`, rounded to `f32`.
pub(crate) const INV_LN2: f32 = f32::from_bits(0x3fb8_aa3b);
/// `1.5 * 2^23`: `t + ROUND` for `|t| < 2^22` is `t` rounded to an integer, held in the low bits.
pub(crate) const ROUND: f32 = 12_582_912.0;
/// `ln 2`'s first 16 significant bits: `k * LN2_HI` is exact for `|k| < 256`.
pub(crate) const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
/// `ln 2 - LN2_HI`, rounded to `f32`.
pub(crate) const LN2_LO: f32 = f32::from_bits(0x35bf_be8e);
/// `e^r ~ 1 + r + r^2 (C2 + C3 r + C4 r^2 + C5 r^3 + C6 r^4)`: minimax (relative error 3.1e-9) on
/// `|r| <= ln 2 / 2 + 2e-5`, coefficients rounded to `f32`.
pub(crate) const C: [f32; 5] = [
    f32::from_bits(0x3eff_fffe),
    f32::from_bits(0x3e2a_aa49),
    f32::from_bits(0x3d2a_ac79),
    f32::from_bits(0x3c09_1cee),
    f32::from_bits(0x3ab5_121f),
];
/// The `k` for which `e^r 2^k` is a normal `f32` (`e^r` lies in `[0.70, 1.42]`): the fast path.
const K_MIN: i32 = -125;
/// See [`K_MIN`].
const K_MAX: i32 = 126;
/// Below this `e^x` rounds to 0 (`e^-104 < 2^-150`); inputs are clamped to it.
const X_MIN: f32 = -104.0;
/// Above this `e^x` overflows to infinity (`e^89 > 2^128`); inputs are clamped to it.
const X_MAX: f32 = 89.0;

/// `e^x` with the bits of every target: NaN for NaN, 0 for `-inf`, `+inf` for `+inf`.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let (k, p) = reduce(x);
    // `k` in range also means `t` was `ROUND + k` exactly (any other `t` has other high bits).
    if k.wrapping_sub(K_MIN) as u32 <= (K_MAX - K_MIN) as u32 {
        // `p 2^k` is normal: the exponent field plus `k`, exactly the product.
        f32::from_bits(p.to_bits().wrapping_add((k as u32) << 23))
    } else {
        exp_outside(x)
    }
}

/// [`exp`] where `e^x` is subnormal, zero or overflows (or `x` is NaN): [`scale`] of the clamped input.
#[cold]
#[inline(never)]
fn exp_outside(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let (k, p) = reduce(clamp(x));
    scale(p, k)
}

/// `x` clamped to `[X_MIN, X_MAX]`, where [`exp`] saturates to 0 and infinity (NaN stays NaN).
#[inline(always)]
pub(crate) fn clamp(x: f32) -> f32 {
    x.clamp(X_MIN, X_MAX)
}

/// `(k, e^r)` with `x = k ln 2 + r`, `|r| <= ln 2 / 2` (a little more where `x / ln 2` rounds
/// across a half): `k` rounded with [`ROUND`] (meaningless unless `|x| < 2^21`), `r` exact but for its
/// last subtraction, the polynomial in a fixed order.
#[inline(always)]
pub(crate) fn reduce(x: f32) -> (i32, f32) {
    let t = x * INV_LN2 + ROUND;
    let k = t.to_bits().wrapping_sub(ROUND.to_bits()) as i32;
    let kf = t - ROUND;
    let r = (x - kf * LN2_HI) - kf * LN2_LO;
    let q = C[0] + r * (C[1] + r * (C[2] + r * (C[3] + r * C[4])));
    (k, 1.0 + (r + (r * r) * q))
}

/// `p 2^k` rounded once, for `k` in `[-150, 128]` (from a clamped input): two exact powers of two,
/// the first product exact, the second rounding (to a subnormal, zero or infinity); where `p 2^k` is
/// normal, the bits of [`exp`]'s exponent addition.
#[inline(always)]
pub(crate) fn scale(p: f32, k: i32) -> f32 {
    let half = k >> 1;
    p * pow2(half) * pow2(k.wrapping_sub(half))
}

/// `2^j` for `j` in `[-126, 127]`.
#[inline(always)]
fn pow2(j: i32) -> f32 {
    f32::from_bits((j.wrapping_add(127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error of `y` against `e^x` in units in the last place of `e^x` as an `f32` (2^-149 for
    /// subnormals).
    fn ulps(x: f32, y: f32) -> f64 {
        let exact = (x as f64).exp();
        let e = ((exact.to_bits() >> 52) as i64 - 1023).max(-126);
        let ulp = 2f64.powi(e as i32 - 23);
        if y.is_infinite() && exact > f32::MAX as f64 {
            return 0.0;
        }
        (y as f64 - exact).abs() / ulp
    }

    /// The largest error in ulps of [`exp`] over the bit patterns `from..=to` in steps of `step`,
    /// and where.
    fn max_error(from: u32, to: u32, step: usize) -> (f64, f32) {
        let mut worst = (0.0, 0.0);
        for bits in (from..=to).step_by(step) {
            let x = f32::from_bits(bits);
            let u = ulps(x, exp(x));
            if u > worst.0 {
                worst = (u, x);
            }
        }
        worst
    }

    #[test]
    fn special_values() {
        assert_eq!(exp(0.0).to_bits(), 1.0f32.to_bits());
        assert_eq!(exp(-0.0).to_bits(), 1.0f32.to_bits());
        assert_eq!(exp(f32::NEG_INFINITY).to_bits(), 0);
        assert_eq!(exp(-1e30).to_bits(), 0);
        assert_eq!(exp(-104.0).to_bits(), 0);
        assert_eq!(exp(-103.9).to_bits(), 1, "the smallest subnormal");
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert!(exp(88.72).is_finite());
        assert!(exp(f32::NAN).is_nan());
    }

    /// The fast path's exponent addition and [`scale`]'s products agree where both apply.
    #[test]
    fn fast_path_is_the_scaled_product() {
        for bits in (0x8000_0000u32..=0xc2ac_0000).step_by(997) {
            let x = f32::from_bits(bits);
            let (k, p) = reduce(x);
            assert_eq!(exp(x).to_bits(), scale(p, k).to_bits(), "{x}");
        }
    }

    /// Every 127th `f32` from -0 down to -104 (of 1.1e9) and from 0 up to 89: within 1 ulp.
    #[test]
    fn within_one_ulp_on_a_sample() {
        for (from, to) in [(0x8000_0000, 0xc2d0_0000), (0, 0x42b2_0000)] {
            let (u, x) = max_error(from, to, 127);
            assert!(u < 1.0, "{u} ulp at {x}");
        }
    }

    /// Every `f32` <= 0 down to -104 (below, the result is 0, as `e^x` rounds): prints the largest
    /// error (0.976 ulp at -5.8606). About a minute in release: `cargo test --release -p microlens --features std --lib --
    /// --ignored every_nonpositive_f32`.
    #[test]
    #[ignore]
    fn within_one_ulp_for_every_nonpositive_f32() {
        let (u, x) = max_error(0x8000_0000, 0xc2d0_0000, 1);
        std::println!("max error {u:.4} ulp at {x:e} ({:#010x})", x.to_bits());
        assert!(u < 1.0, "{u} ulp at {x}");
    }
}
