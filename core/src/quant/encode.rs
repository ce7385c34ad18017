//! Weight encoders, one row at a time, with the same rounding as the run-time activation quantiser
//! (`libm::roundf`, half away from zero): the converter's quantisers call these, so host and device agree.

use super::activations::quantize_one;
use crate::blob::{scale_up, I4_GROUP};

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
    for (g, (group, s)) in w.chunks(I4_GROUP).zip(scales.iter_mut()).enumerate() {
        *s = weight_scale(group, I4_MAX)?;
        for (i, &v) in group.iter().enumerate() {
            put_nibble(out, g * I4_GROUP + i, i4_one(v, *s));
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::int4::nibble;

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
}
