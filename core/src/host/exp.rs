//! The softmax's exponentials on the host: eight `libm::expf` at a time, the same bits.

use crate::math::softmax;

/// The softmax's first half on the host, [`softmax::exp_shifted`] with the same bits:
/// `x_i <- libm::expf(x_i - max)`, returning their sum added in order. `libm::expf` (FreeBSD's
/// `e_expf.c`) is straight-line `f32` arithmetic on the range a softmax meets, `2⁻¹⁴ < |x| < 87.33`
/// (and `1 + x` below it): eight values at a time, every lane the same operations in the same
/// order (no fused multiply-add), so the same bits; any other value (|x| ≥ 87.33, infinities, NaN)
/// is `libm::expf` itself. With `fast-math` (micromath's `exp`) it is the core's loop.
pub(crate) fn exp_shifted(x: &mut [f32], max: f32) -> f32 {
    #[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just detected), the only requirement of `exp_shifted_avx2`.
        #[allow(unsafe_code)]
        return unsafe { exp_shifted_avx2(x, max) };
    }
    softmax::exp_shifted(x, max)
}

/// [`exp_lanes`] over `x` with AVX2, then the ordered sum.
#[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
#[target_feature(enable = "avx2")]
fn exp_shifted_avx2(x: &mut [f32], max: f32) -> f32 {
    // Whole passes, then the last values in a padded one (the padding's lanes are dropped).
    for c in x.chunks_mut(EXP_LANES) {
        let mut v = [0.0f32; EXP_LANES];
        for (v, x) in v.iter_mut().zip(c.iter()) {
            *v = x - max;
        }
        let (e, ok) = exp_lanes(v);
        for (((c, e), ok), v) in c.iter_mut().zip(e).zip(ok).zip(v) {
            *c = if ok { e } else { libm::expf(v) };
        }
    }
    let mut sum = 0.0f32;
    for v in x.iter() {
        sum += v;
    }
    sum
}

/// Values per pass of [`exp_lanes`].
#[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
const EXP_LANES: usize = 8;

/// `libm::expf` of each lane, and whether the lane is in the range computed here (`|x| < 87.33`, not
/// NaN); the other lanes' values are meaningless. The steps and constants of libm 0.2's `expf`, with
/// its three argument reductions (`k` from `x / ln 2` rounded, `±1`, or `0` where `hi = x`, `lo = 0`
/// give the same operations) selected per lane, and `scalbnf(y, k)` as the product by `2^k` it is for
/// `|k| <= 126`.
#[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
#[inline(always)]
fn exp_lanes(x: [f32; EXP_LANES]) -> ([f32; EXP_LANES], [bool; EXP_LANES]) {
    const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
    const LN2_LO: f32 = f32::from_bits(0x35bf_be8e);
    const INV_LN2: f32 = f32::from_bits(0x3fb8_aa3b);
    const P1: f32 = f32::from_bits(0x3e2a_aa8f);
    const P2: f32 = f32::from_bits(0xbb35_5215);
    let mut out = [0.0f32; EXP_LANES];
    let mut ok = [false; EXP_LANES];
    for i in 0..EXP_LANES {
        let x = x[i];
        let sign = x.to_bits() & 0x8000_0000;
        let hx = x.to_bits() & 0x7fff_ffff;
        // `(INV_LN2 * x + HALF[sign]) as i32` (truncation: `trunc` is exact, and small here);
        // `1 - 2 sign` is `±1`.
        let half = f32::from_bits(0x3f00_0000 | sign);
        let big = (INV_LN2 * x + half).trunc();
        let one = f32::from_bits(0x3f80_0000 | sign);
        let kf = if hx > 0x3f85_1592 {
            big
        } else if hx > 0x3eb1_7218 {
            one
        } else {
            0.0
        };
        let hi = x - kf * LN2_HI;
        let lo = kf * LN2_LO;
        let r = hi - lo;
        let xx = r * r;
        let c = r - xx * (P1 + xx * P2);
        let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
        // `2^k` for `|k| <= 126` (out-of-range lanes are not `ok`; clamped to stay finite).
        let k = kf.clamp(-126.0, 127.0) as i32;
        let scale = f32::from_bits(((0x7f + k) as u32) << 23);
        out[i] = if hx > 0x3900_0000 { y * scale } else { 1.0 + x };
        ok[i] = hx < 0x42ae_ac50;
    }
    (out, ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::lcg;
    use std::vec::Vec;

    #[test]
    fn host_exp_has_the_bits_of_libm() {
        let mut values: Vec<f32> = [
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            6.1e-5,
            -6.1e-5,
            0.3465,
            -0.3466,
            0.5,
            -1.0397,
            1.0398,
            -87.33,
            -87.34,
            -88.0,
            -103.9,
            -104.0,
            -1e4,
            f32::NEG_INFINITY,
            f32::NAN,
            88.7,
            89.0,
        ]
        .to_vec();
        let mut next = lcg(7);
        for i in 0..20_000 {
            let seed = next();
            let unit = (seed >> 8) as f32 / (1u32 << 24) as f32;
            values.push(match i % 3 {
                0 => -120.0 * unit,
                1 => -2.0 * unit,
                _ => f32::from_bits(seed) % 100.0,
            });
        }
        for max in [0.0f32, 3.5, -2.0] {
            for row in values.chunks(61) {
                let (mut a, mut b) = (row.to_vec(), row.to_vec());
                let (sa, sb) = (exp_shifted(&mut a, max), softmax::exp_shifted(&mut b, max));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "{row:?}");
                assert_eq!(sa.to_bits(), sb.to_bits());
            }
        }
    }

    /// Every `f32` bit pattern through the host's exponentials and through the core's loop (with
    /// `max = 0`, so `x - max` is `x`): about a minute in release on two cores, so not in the default
    /// run: `cargo test --release -p microlens --features std --lib -- --ignored every_f32`.
    #[test]
    #[ignore]
    fn host_exp_has_the_bits_of_libm_for_every_f32() {
        const CHUNK: u64 = 1 << 16;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let chunks = (1u64 << 32) / CHUNK;
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    let (mut a, mut b) = (
                        std::vec![0.0f32; CHUNK as usize],
                        std::vec![0.0f32; CHUNK as usize],
                    );
                    for c in (t..chunks).step_by(threads as usize) {
                        for (i, (a, b)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
                            *a = f32::from_bits((c * CHUNK + i as u64) as u32);
                            *b = *a;
                        }
                        // A `max` the compiler cannot see (a constant 0 lets it drop `x - 0`,
                        // which quiets a signalling NaN at run time).
                        let max = std::hint::black_box(0.0);
                        exp_shifted(&mut a, max);
                        softmax::exp_shifted(&mut b, max);
                        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                            assert_eq!(
                                x.to_bits(),
                                y.to_bits(),
                                "x bits {:#010x}",
                                c * CHUNK + i as u64
                            );
                        }
                    }
                });
            }
        });
    }
}
