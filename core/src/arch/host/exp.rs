//! The softmax's exponentials on the host: eight [`exp`](crate::math::exp::exp) at a time, the same
//! bits.
#![allow(unsafe_code)]

#[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
use crate::math::exp;

/// The softmax's first half on the host, [`crate::math::softmax::exp_shifted`] with the same bits:
/// `x_i <- exp(x_i - max)`, returning their sum added in order. Eight values at a time, every lane
/// the core's operations in the same order (no fused multiply-add); where the core takes its
/// exponent addition, the lanes multiply by two powers of two, the same bits (the only rounding is
/// the last product, exact where the result is normal). `None` (the core's loop) without AVX2 or
/// with `fast-math` (micromath's `exp`).
pub(crate) fn exp_shifted(x: &mut [f32], max: f32) -> Option<f32> {
    #[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just detected), the only requirement of `exp_shifted_avx2`.
        return Some(unsafe { exp_shifted_avx2(x, max) });
    }
    let _ = (x, max);
    None
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
        for (c, e) in c.iter_mut().zip(exp_lanes(v)) {
            *c = e;
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

/// [`exp::exp`] of each lane without branches: the input clamped (a no-op where the core takes its
/// fast path), the same reduction and polynomial, the scaling by two powers of two, NaN passed on.
#[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
#[inline(always)]
fn exp_lanes(x: [f32; EXP_LANES]) -> [f32; EXP_LANES] {
    let mut out = [0.0f32; EXP_LANES];
    for (o, x) in out.iter_mut().zip(x) {
        let (k, p) = exp::reduce(exp::clamp(x));
        let y = exp::scale(p, k);
        // `x` where it is NaN, as a mask (a branch here would keep the lanes from vectorising).
        let nan = u32::from(x.is_nan()).wrapping_neg();
        *o = f32::from_bits((x.to_bits() & nan) | (y.to_bits() & !nan));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::softmax::exp_shifted_portable;
    use crate::testing::lcg;
    use std::vec::Vec;

    #[test]
    fn host_exp_has_the_bits_of_the_core() {
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
            -86.0,
            -86.6,
            -86.7,
            -87.33,
            -87.34,
            -103.28,
            -103.97,
            -103.98,
            -88.0,
            -103.9,
            -104.0,
            -1e4,
            f32::NEG_INFINITY,
            f32::NAN,
            88.0,
            88.7,
            88.73,
            89.0,
            1e30,
            f32::INFINITY,
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
                let (sa, sb) = (
                    exp_shifted(&mut a, max).unwrap_or_else(|| exp_shifted_portable(&mut a, max)),
                    exp_shifted_portable(&mut b, max),
                );
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
    fn host_exp_has_the_bits_of_the_core_for_every_f32() {
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
                        if exp_shifted(&mut a, max).is_none() {
                            exp_shifted_portable(&mut a, max);
                        }
                        exp_shifted_portable(&mut b, max);
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
