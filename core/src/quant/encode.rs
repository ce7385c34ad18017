//! Weight encoders, one row at a time, rounding half away from zero (`libm::roundf`): the converter's
//! quantisers call these.

use crate::blob::{scale_up, I4_GROUP, I8_GROUP};

/// One int8 weight: `x / scale` rounded half away
/// from zero (the integer `libm::roundf` gives, without its call), clamped to `-127..=127`. A non-finite
/// quotient (from a zero or non-finite scale) gives 0 (NaN) or the clamp, never a panic.
///
/// The FPU rounds: adding `1.5 * 2^23` leaves no fraction bits, so the sum is the nearest integer plus
/// that constant (ties to even, IEEE 754's default on every target; Rust never contracts to a fused
/// multiply-add), read back from its bits. Within `-127..=127` that integer is the answer but for a
/// tie (`y - nearest`, exact, is `+-0.5`) that went to the even neighbour towards zero, which moves
/// one step away from zero; outside it (`|y| >= 127.5`, or a NaN, whose bits land far from the
/// constant's) the clamp decides. Integer tests on the bits, the same answers as `libm::roundf`.
#[inline]
pub fn quantize_one(x: f32, scale: f32) -> i8 {
    const MAGIC: f32 = 12_582_912.0;
    let y = x / scale;
    let r = y + MAGIC;
    let q = (r.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    if (q.wrapping_add(127) as u32) <= 254 {
        let d = y - (r - MAGIC);
        if d.to_bits() << 1 != 0.5f32.to_bits() << 1 {
            q as i8
        } else if d > 0.0 && y > 0.0 {
            q as i8 + 1
        } else if d < 0.0 && y < 0.0 {
            q as i8 - 1
        } else {
            q as i8
        }
    } else if y > 0.0 {
        127
    } else if y < 0.0 {
        -127
    } else {
        0
    }
}

/// Largest `i4` magnitude: the range is symmetric, `-7..=7`.
pub const I4_MAX: f32 = 7.0;

/// `max|x| / q_max` rounded up to the next `f16` (the blob stores scales as `f16`); 1 for an all-zero
/// `x`. `None` when `x` holds a value beyond `q_max * 65504` (the `f16` range) or a NaN.
pub fn weight_scale(x: &[f32], q_max: f32) -> Option<f32> {
    let max = x.iter().fold(0.0f32, |m, v| m.max(libm::fabsf(*v)));
    if x.iter().any(|v| v.is_nan()) {
        return None;
    }
    if max == 0.0 {
        return Some(1.0);
    }
    scale_up(max / q_max)
}

/// Symmetric int8 row: writes `round(w / s)` into `out` (`w.len()` bytes) and returns
/// `s = max|w| / 127` (see [`weight_scale`]; `None` if `w` cannot be encoded).
pub fn i8_row(w: &[f32], out: &mut [u8]) -> Option<f32> {
    let s = weight_scale(w, 127.0)?;
    out.iter_mut()
        .zip(w)
        .for_each(|(o, &w)| *o = quantize_one(w, s) as u8);
    Some(s)
}

/// One `i4` value: `round(w / s)` clamped to `-7..=7`.
fn i4_one(w: f32, s: f32) -> i8 {
    quantize_one(w, s).clamp(-7, 7)
}

/// Puts the int4 value `v` (`-8..=7`) at column `c` of a packed row: two per byte, low nibble first
/// (bytes start at zero; a column beyond `out` is dropped).
fn put_nibble(out: &mut [u8], c: usize, v: i8) {
    if let Some(b) = out.get_mut(c / 2) {
        *b |= ((v as u8) & 0x0f) << (4 * (c % 2));
    }
}

/// Packs a row of int4 values (`-8..=7`) as the blob stores them: two per byte, low nibble first, into
/// `out` (`ceil(q.len() / 2)` bytes, [`DType::row_bytes`](crate::DType::row_bytes)).
pub fn pack_i4(q: &[i8], out: &mut [u8]) {
    out.iter_mut().for_each(|b| *b = 0);
    q.iter()
        .enumerate()
        .for_each(|(c, &v)| put_nibble(out, c, v));
}

/// Symmetric int4 row in groups of [`I4_GROUP`]: packs `round(w / s_g)` two per byte, low nibble
/// first, into `out` (`ceil(w.len() / 2)` bytes), and writes each group's `s_g = max|w_g| / 7` into
/// `scales` (`ceil(w.len() / 32)`; see [`weight_scale`]). `None` if `w` cannot be encoded.
pub fn i4_row(w: &[f32], out: &mut [u8], scales: &mut [f32]) -> Option<()> {
    out.iter_mut().for_each(|b| *b = 0);
    grouped_row(w, I4_GROUP, I4_MAX, scales, |c, v, s| {
        put_nibble(out, c, i4_one(v, s))
    })
}

/// Symmetric int8 row in groups of [`I8_GROUP`] (`DType::I8G`): `round(w / s_g)` into `out`
/// (`w.len()` bytes), each group's `s_g = max|w_g| / 127` into `scales` (`ceil(w.len() / 8)`).
/// `None` if `w` cannot be encoded.
pub fn i8g_row(w: &[f32], out: &mut [u8], scales: &mut [f32]) -> Option<()> {
    grouped_row(w, I8_GROUP, 127.0, scales, |c, v, s| {
        if let Some(o) = out.get_mut(c) {
            *o = quantize_one(v, s) as u8;
        }
    })
}

/// Each group of `group` values of `w` gets the scale `max|w_g| / q_max` ([`weight_scale`]) in
/// `scales`, then `put(c, w[c], s_g)` for its columns.
fn grouped_row(
    w: &[f32],
    group: usize,
    q_max: f32,
    scales: &mut [f32],
    mut put: impl FnMut(usize, f32, f32),
) -> Option<()> {
    for (g, (values, s)) in w.chunks(group).zip(scales.iter_mut()).enumerate() {
        *s = weight_scale(values, q_max)?;
        for (i, &v) in values.iter().enumerate() {
            put(g * group + i, v, *s);
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::int4::nibble;
    use crate::testing::lcg;

    #[test]
    fn i8_rows_round_trip_within_half_a_step() {
        let w = [0.5f32, -1.27, 0.01, 0.0];
        let mut q = [0u8; 4];
        let s = i8_row(&w, &mut q).unwrap();
        assert!((1.27 / 127.0..1.27 / 127.0 * 1.001).contains(&s), "{s}");
        for (&w, &q) in w.iter().zip(&q) {
            assert!((w - (q as i8) as f32 * s).abs() <= 0.5 * s);
        }
        assert_eq!(i8_row(&[0.0; 3], &mut q), Some(1.0));
        assert_eq!(i8_row(&[1e7, 0.0], &mut q), None);
        assert_eq!(i8_row(&[f32::NAN], &mut q), None);
    }

    #[test]
    fn i4_rows_pack_groups_low_nibble_first() {
        let mut w = [0.0f32; 35];
        w[0] = 7.0;
        w[1] = -3.0;
        w[33] = -0.5;
        let (mut q, mut s) = ([0u8; 18], [0.0f32; 2]);
        i4_row(&w, &mut q, &mut s).unwrap();
        assert_eq!(s[0], 1.0);
        assert!((0.5 / 7.0..0.5 / 7.0 * 1.001).contains(&s[1]));
        assert_eq!(q[0], 0xd7);
        assert_eq!((nibble(&q, 0), nibble(&q, 1), nibble(&q, 33)), (7, -3, -7));
    }

    #[test]
    fn rounds_half_away_from_zero_and_survives_zero_and_nan() {
        assert_eq!(quantize_one(2.5, 1.0), 3);
        assert_eq!(quantize_one(-2.5, 1.0), -3);
        assert_eq!(quantize_one(1e9, 1.0), 127);
        assert_eq!(quantize_one(-1e9, 1.0), -127);
        assert_eq!(quantize_one(0.0, 0.0), 0);
        assert_eq!(quantize_one(f32::NAN, 1.0), 0);
        assert_eq!(quantize_one(f32::INFINITY, 1.0), 127);
        assert_eq!(quantize_one(-3e9, 1.0), -127);
    }

    /// The reference: `libm::roundf` of the quotient, clamped.
    fn plain(x: f32, s: f32) -> i8 {
        (libm::roundf(x / s) as i32).clamp(-127, 127) as i8
    }

    #[test]
    fn rounding_equals_libm_roundf_on_every_value_up_to_128() {
        // Every f32 in [-128, 128] (every tie among them), then a sweep of quotients and odd inputs.
        let mut bits = 0u32;
        while bits < 0x4300_0001 {
            for y in [f32::from_bits(bits), -f32::from_bits(bits)] {
                assert_eq!(quantize_one(y, 1.0), plain(y, 1.0), "{y}");
            }
            bits += 1;
        }
        let mut next = lcg(0x9e37_79b9);
        for _ in 0..100_000 {
            let seed = next();
            let (x, s) = (
                (seed >> 8) as f32 / 65_536.0 - 128.0,
                0.37 + (seed & 0xff) as f32 / 300.0,
            );
            assert_eq!(quantize_one(x, s), plain(x, s), "{x} / {s}");
        }
        for (x, s) in [
            (f32::NAN, 1.0),
            (0.0, 0.0),
            (1.0, 0.0),
            (-3e38, 0.1),
            (-1e9, 1.0),
        ] {
            assert_eq!(quantize_one(x, s), plain(x, s), "{x} / {s}");
        }
    }

    #[test]
    fn rounding_equals_libm_roundf() {
        let mut next = lcg(0x1234_5678);
        for i in 0..200_000u32 {
            let seed = next();
            let x = f32::from_bits(seed);
            let y = (i as f32 - 100_000.0) / 512.0;
            for (x, s) in [(x, 1.0), (y, 1.0), (y, 0.37), (x, 3e-39)] {
                assert_eq!(quantize_one(x, s), plain(x, s), "{x} / {s}");
            }
        }
        for y in [
            0.5f32,
            -0.5,
            1.5,
            -1.5,
            126.5,
            -126.5,
            0.49999997,
            -0.49999997,
            2.5000002,
        ] {
            assert_eq!(quantize_one(y, 1.0), plain(y, 1.0), "{y}");
        }
    }
}
