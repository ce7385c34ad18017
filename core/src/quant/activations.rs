//! Per-token symmetric quantisation of an activation vector: int8 (`scale = max|x| / 127`) or int16
//! (`scale = max|x| / 32767`), `q = round(x * (1 / scale))` to nearest, ties to even, so
//! `x ~ q * scale`. The weight encoders round `w / scale` half away from zero (`encode::quantize_one`).

pub use super::quantized::{Quantized, Wide, Q16_MAX, Q_MAX};

/// `y` rounded to the nearest integer, ties to even: the FPU's own rounding, adding `1.5 * 2^23` leaves
/// no fraction bits, read back from the sum's bits. Exact for `|y| < 2^22`; beyond, or for a NaN, a
/// large value of the input's sign, which the callers' clamps take.
#[inline(always)]
fn nearest(y: f32) -> i32 {
    nearest_bits(y) as i32 - MAGIC.to_bits() as i32
}

/// `1.5 * 2^23`: added to a float below `2^22` in magnitude, it leaves no fraction bits.
const MAGIC: f32 = 12_582_912.0;

/// The bits of `y + 1.5 * 2^23`: [`nearest`]`(y)` plus the magic number's bits (`0x4b40_0000`, whose
/// low 16 bits are 0).
#[inline(always)]
fn nearest_bits(y: f32) -> u32 {
    (y + MAGIC).to_bits()
}

/// One int16 value: `x * inv` (`inv = 32767 / max|x|`, [`scale16`]) rounded to nearest, ties to even
/// (at 1/65534 of the vector's range the tie rule does not matter, and no division or tie fix is
/// spent), clamped to `-32767..=32767` (a NaN to the clamp).
#[inline(always)]
pub fn quantize_one16(x: f32, inv: f32) -> i16 {
    nearest(x * inv).clamp(-32767, 32767) as i16
}

/// One int8 activation: `x * inv` rounded to nearest, ties to even, saturated to the `i8` range (one
/// `SSAT`). With `inv` from [`scale8`] of a vector holding `x` the result is within `-127..=127`:
/// `|x| * inv <= 127 * (1 + 2^-23) < 127.5`; a NaN goes to an end of the range. A multiply where the
/// weights' `encode::quantize_one` divides, and no tie fix: the same integer but where `x * inv` and
/// `x / scale` straddle a half.
#[inline(always)]
pub fn quantize_one8(x: f32, inv: f32) -> i8 {
    nearest(x * inv).clamp(-128, 127) as i8
}

/// `max|x|` over the values of `x` that are not NaN (+0 for none): as integers, each value's bits
/// shifted left once (the sign dropped), which order as the magnitudes do up to infinity
/// (`0xff00_0000`); a larger one is a NaN, and then the float comparisons decide. One integer compare
/// per value instead of the FPU's compare and flag transfer; the same value bit for bit.
#[inline]
pub fn max_abs(x: &[f32]) -> f32 {
    max_of_key(x, magnitude_key(x))
}

/// The largest of `x`'s values' bits shifted left once (0 for none): `max|x|`'s bits shifted left
/// once when at most infinity's (`0xff00_0000`), else `x` holds a NaN.
#[inline(always)]
fn magnitude_key(x: &[f32]) -> u32 {
    let key = |m: u32, v: &f32| m.max(v.to_bits() << 1);
    // Four values per pass (one loop test, paired loads), then the rest.
    let fours = x.chunks_exact(4);
    let rest = fours.remainder().iter().fold(0, key);
    fours.fold(rest, |m, q| q.iter().fold(m, key))
}

/// [`max_abs`] of `x` from its [`magnitude_key`] `m`.
#[inline(always)]
fn max_of_key(x: &[f32], m: u32) -> f32 {
    match m <= f32::INFINITY.to_bits() << 1 {
        true => f32::from_bits(m >> 1),
        false => crate::math::max_of(x.iter().map(|v| libm::fabsf(*v)), 0.0),
    }
}

/// A vector's scale and its inverse for the largest integer `q_max`: `(max|x| / q_max, q_max / max|x|)`,
/// `(0, 0)` for an all-zero vector (NaNs ignored); the inverse at most `f32::MAX` (a subnormal maximum).
#[inline]
fn scale_and_inverse(x: &[f32], q_max: f32) -> (f32, f32) {
    scale_of(max_abs(x), q_max)
}

/// [`scale_and_inverse`] of a vector whose `max|x|` is `max`.
#[inline]
fn scale_of(max: f32, q_max: f32) -> (f32, f32) {
    match max > 0.0 {
        true => (max / q_max, (q_max / max).min(f32::MAX)),
        false => (0.0, 0.0),
    }
}

/// The int16 scale of a vector and its inverse: `(max|x| / 32767, 32767 / max|x|)`, `(0, 0)` for an
/// all-zero vector (NaNs ignored).
#[inline]
pub fn scale16(x: &[f32]) -> (f32, f32) {
    scale_and_inverse(x, Q16_MAX)
}

/// The int8 scale of a vector and its inverse: `(max|x| / 127, 127 / max|x|)`, `(0, 0)` for an
/// all-zero vector (NaNs ignored).
#[inline]
pub fn scale8(x: &[f32]) -> (f32, f32) {
    scale_and_inverse(x, Q_MAX)
}

/// Quantises `x` into the front of `buf` (at least `x.len()` long; any excess of `x` is ignored) and
/// returns the values with their scale. If `x` is whole groups of four and `buf` has `2 * x.len()`
/// more bytes, word-aligned after the values, the values' lanes go there too.
pub fn quantize<'q>(x: &[f32], buf: &'q mut [i8]) -> Quantized<'q> {
    // In assembly where it can: the same scale, values and lanes as the portable loops.
    let buf = match crate::arch::quantize8(x, buf, Q_MAX) {
        Ok((q, lanes, scale)) => return int8_parts(q, lanes, scale),
        Err(buf) => buf,
    };
    quantize_portable(x, buf)
}

/// [`quantize`] with the lanes of every whole eight columns in the int4 kernel's order
/// (`int4_rows::rearrange` of the int8 kernel's; a last group of four stays as it is): in one call of
/// the assembly where it can, else [`quantize`] then the rearrangement in place.
pub(crate) fn quantize_i4<'q>(x: &[f32], buf: &'q mut [i8]) -> Quantized<'q> {
    let buf = match crate::arch::quantize8_i4(x, buf, Q_MAX) {
        Ok((q, lanes, scale)) => return int8_parts(q, lanes, scale),
        Err(buf) => buf,
    };
    let (scale, n, words) = {
        let q = quantize(x, buf);
        (q.scale, q.q.len(), q.lanes.len())
    };
    let lanes = buf.get_mut(n..n + 4 * words).unwrap_or(&mut []);
    super::int4_rows::rearrange(bytemuck::try_cast_slice_mut(lanes).unwrap_or(&mut []));
    quantized(buf, n, scale)
}

/// int8 values, their lanes and their scale as a [`Quantized`].
#[inline(always)]
fn int8_parts<'q>(q: &'q [i8], lanes: &'q [u32], scale: f32) -> Quantized<'q> {
    Quantized {
        q,
        wide: Wide(&[]),
        scale,
        lanes,
    }
}

crate::arch::on_assembly_targets! {
    inline(never);
    /// [`quantize`] in portable Rust (out of line where the assembly takes most vectors, so that its
    /// registers do not weigh on the assembly's calls).
    fn quantize_portable<'q>(x: &[f32], buf: &'q mut [i8]) -> Quantized<'q> {
        let n = x.len().min(buf.len());
        let x = &x[..n];
        let (q, rest) = buf.split_at_mut(n);
        let words = match bytemuck::try_cast_slice_mut::<i8, u32>(rest) {
            Ok(words) if n % 4 == 0 => words.get_mut(..n / 2).unwrap_or(&mut []),
            _ => &mut [],
        };
        let m = magnitude_key(x);
        let (scale, inv) = scale_of(max_of_key(x, m), Q_MAX);
        match (words.is_empty(), m < f32::INFINITY.to_bits() << 1) {
            (true, _) => quantize_into(x, inv, q.iter_mut()),
            // A finite maximum, so no NaN or infinity in `x`: `|x * inv| <= 127 * (1 + 2^-23)` rounds
            // to at most 127 and every value is within `-127..=127` unsaturated, its 16-bit lane the low
            // half of the rounding sum's bits (as for int16, [`pack16`]); the bytes from the lanes.
            (false, true) => {
                pack16(words, x, inv);
                for (q, lanes) in q.chunks_exact_mut(4).zip(words.chunks_exact(2)) {
                    q.copy_from_slice(&lane_bytes(lanes[0], lanes[1]).map(|b| b as i8));
                }
            }
            // Four values at a time, saturated, their lanes from the same registers.
            (false, false) => {
                let groups = q.chunks_exact_mut(4).zip(x.chunks_exact(4));
                for ((q, x), lanes) in groups.zip(words.chunks_exact_mut(2)) {
                    let v = [0, 1, 2, 3].map(|k| quantize_one8(x[k], inv));
                    let (even, odd) = (lane_pair(v[0], v[2]), lane_pair(v[1], v[3]));
                    q.copy_from_slice(&lane_bytes(even, odd).map(|b| b as i8));
                    lanes[0] = even;
                    lanes[1] = odd;
                }
            }
        }
        Quantized {
            q,
            wide: Wide(&[]),
            scale,
            lanes: words,
        }
    }
}

/// The four int8 values of a group from its lanes `[q0, q2]` and `[q1, q3]`: the low byte of each
/// 16-bit lane, `[q0, q1, q2, q3]`.
#[inline(always)]
fn lane_bytes(even: u32, odd: u32) -> [u8; 4] {
    ((even & 0x00ff_00ff) | (odd & 0x00ff_00ff) << 8).to_le_bytes()
}

/// Two int8 values as the kernel's 16-bit lanes: `a` in the low half, `b` in the high, sign-extended.
#[inline(always)]
fn lane_pair(a: i8, b: i8) -> u32 {
    crate::arch::lane_word(a.into(), b.into())
}

/// The [`Quantized`] that [`quantize`] of `n` values with `scale` left in `buf`, read again.
pub(crate) fn quantized(buf: &[i8], n: usize, scale: f32) -> Quantized<'_> {
    let (q, rest) = buf.split_at(n.min(buf.len()));
    let lanes = match bytemuck::try_cast_slice::<i8, u32>(rest) {
        Ok(words) if q.len() % 4 == 0 => words.get(..q.len() / 2).unwrap_or(&[]),
        _ => &[],
    };
    Quantized {
        q,
        wide: Wide(&[]),
        scale,
        lanes,
    }
}

/// The int16 words of `buf` (its first whole, aligned words), as values.
fn wide_words(buf: &mut [i8]) -> &mut [u32] {
    let whole = buf.len() / 4 * 4;
    bytemuck::try_cast_slice_mut::<i8, u32>(&mut buf[..whole]).unwrap_or(&mut [])
}

/// Quantises `x` to int16 into the front of `buf` (word-aligned, `2 * x.len()` bytes; any excess of
/// `x` is ignored) in lane order ([`Wide`]), with the scale `max|x| / 32767`. The lanes are the values
/// themselves, given when `x` is whole groups of four.
pub fn quantize16<'q>(x: &[f32], buf: &'q mut [i8]) -> Quantized<'q> {
    // In assembly where it can: the same scale and values as the portable loops.
    let buf = match crate::arch::quantize16(x, buf, Q16_MAX) {
        Ok((lanes, values, scale)) => {
            return Quantized {
                q: &[],
                wide: Wide(values),
                scale,
                lanes,
            }
        }
        Err(buf) => buf,
    };
    quantize16_portable(x, buf)
}

crate::arch::on_assembly_targets! {
    inline(never);
    /// [`quantize16`] in portable Rust (out of line where the assembly takes most vectors).
    fn quantize16_portable<'q>(x: &[f32], buf: &'q mut [i8]) -> Quantized<'q> {
        let words = wide_words(buf);
        let values: &mut [i16] = bytemuck::cast_slice_mut(words);
        let n = x.len().min(values.len());
        let x = &x[..n];
        let m = magnitude_key(x);
        let (scale, inv) = scale_of(max_of_key(x, m), Q16_MAX);
        let groups = n / 4;
        match m < f32::INFINITY.to_bits() << 1 {
            // A finite maximum, so no NaN or infinity in `x`: `|x * inv| <= 32767 * (1 + 2^-24)` rounds
            // to at most 32767.002 and every value is within `-32767..=32767` unclamped, its `i16` the
            // low half of the rounding sum's bits (the magic number's low half is 0). Two values per
            // word, the lanes `[x0, x2]` and `[x1, x3]`.
            true => pack16(bytemuck::cast_slice_mut(&mut values[..4 * groups]), x, inv),
            false => {
                for (v, x) in values.chunks_exact_mut(4).zip(x.chunks_exact(4)) {
                    for (v, k) in v.iter_mut().zip([0, 2, 1, 3]) {
                        *v = quantize_one16(x[k], inv);
                    }
                }
            }
        }
        for (v, &x) in values[4 * groups..n].iter_mut().zip(&x[4 * groups..]) {
            *v = quantize_one16(x, inv);
        }
        quantized16(buf, n, scale)
    }
}

/// Words `2g`, `2g + 1` of `words` become the low halves of [`nearest_bits`]`(x[4g + k] * inv)`
/// paired `(k = 0, 2)` and `(1, 3)` (low half first), for every `g < min(words.len() / 2, x.len() / 4)`:
/// the int16 lanes of values known within `-32767..=32767`. On DSP cores with an FPU, vectors with a
/// normal maximum take the assembly (`arch/armv7em/quantize.rs`), the same operations with `max|x|`.
#[inline]
fn pack16(words: &mut [u32], x: &[f32], inv: f32) {
    for (w, x) in words.chunks_exact_mut(2).zip(x.chunks_exact(4)) {
        let low = |k: usize| nearest_bits(x[k] * inv) & 0xffff;
        let high = |k: usize| nearest_bits(x[k] * inv) << 16;
        w[0] = low(0) | high(2);
        w[1] = low(1) | high(3);
    }
}

/// The [`Quantized`] that [`quantize16`] of `n` values with `scale` left in `buf`, read again.
pub(crate) fn quantized16(buf: &[i8], n: usize, scale: f32) -> Quantized<'_> {
    let whole = buf.len() / 4 * 4;
    let words = bytemuck::try_cast_slice::<i8, u32>(&buf[..whole]).unwrap_or(&[]);
    let values: &[i16] = bytemuck::cast_slice(words);
    let values = &values[..n.min(values.len())];
    let lanes = match values.len() % 4 {
        0 => &words[..values.len() / 2],
        _ => &[],
    };
    Quantized {
        q: &[],
        wide: Wide(values),
        scale,
        lanes,
    }
}

/// `q[i] = round(x[i] * inv)` ([`quantize_one8`], `inv` from [`scale8`]) for as many values as `q`
/// yields.
pub fn quantize_into<'q>(x: &[f32], inv: f32, q: impl Iterator<Item = &'q mut i8>) {
    q.zip(x).for_each(|(q, &x)| *q = quantize_one8(x, inv));
}

crate::arch::on_assembly_targets! {
    inline(always);
    /// `q[i * stride] = round(x[i] * inv)` ([`quantize_one8`], `inv` from [`scale8`]) for every value
    /// whose slot `q` holds (none for a `stride` of 0): the target's strided store
    /// (`crate::arch::store_strided`).
    pub fn quantize_strided(x: &[f32], inv: f32, q: &mut [i8], stride: usize) {
        crate::arch::store_strided(x, q, stride, |x| quantize_one8(x, inv));
    }
}

/// `q * scale`, written into `out`.
#[cfg(any(feature = "encode", test))]
pub fn dequantize(q: &[i8], scale: f32, out: &mut [f32]) {
    out.iter_mut()
        .zip(q)
        .for_each(|(o, &q)| *o = q as f32 * scale);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::lcg;

    #[test]
    fn round_trip_within_half_a_step() {
        let x = [0.3f32, -1.7, 2.54, 0.0, -2.54, 1e-3];
        let mut buf = [0i8; 6];
        let qx = quantize(&x, &mut buf);
        assert_eq!(qx.scale, 2.54 / 127.0);
        assert_eq!(qx.q[2], 127);
        assert_eq!(qx.q[4], -127);
        let mut back = [0.0f32; 6];
        dequantize(qx.q, qx.scale, &mut back);
        for (a, b) in x.iter().zip(&back) {
            assert!((a - b).abs() <= 0.5 * qx.scale * 1.0001, "{a} vs {b}");
        }
    }

    #[test]
    fn int16_values_are_in_lane_order_and_read_back_in_column_order() {
        let x: std::vec::Vec<f32> = (0..11).map(|i| i as f32 - 5.0).collect();
        let mut words = [0u32; 8];
        let q = quantize16(&x, bytemuck::cast_slice_mut(&mut words));
        assert_eq!(scale16(&x), (5.0 / 32767.0, 32767.0 / 5.0));
        assert_eq!(q.scale, 5.0 / 32767.0);
        assert!(q.lanes.is_empty() && q.q.is_empty());
        for (c, &x) in x.iter().enumerate() {
            assert_eq!(
                q.wide.get(c),
                quantize_one16(x, 32767.0 / 5.0) as i32,
                "{c}"
            );
            assert!((q.wide.get(c) as f32 * q.scale - x).abs() <= 0.5 * q.scale * 1.001);
        }
        assert_eq!(
            (q.wide.get(0), q.wide.get(10), q.wide.get(11)),
            (-32767, 32767, 0)
        );
        // Whole groups: the words are the kernel's lanes, [x0, x2] and [x1, x3].
        let q = quantize16(&x[..8], bytemuck::cast_slice_mut(&mut words));
        let lane = |a: i32, b: i32| (a as u16 as u32) | (b as u16 as u32) << 16;
        let v = |c| q.wide.get(c);
        assert_eq!(
            q.lanes,
            &[
                lane(v(0), v(2)),
                lane(v(1), v(3)),
                lane(v(4), v(6)),
                lane(v(5), v(7))
            ]
        );
        assert!(quantize16(&x, &mut [0i8; 6]).wide.len() == 2);
        assert_eq!(quantize_one16(1e9, 1.0), 32767);
        assert_eq!(quantize_one16(-1e9, 1.0), -32767);
        assert_eq!(
            (quantize_one16(-2.5, 1.0), quantize_one16(3.5, 1.0)),
            (-2, 4)
        );
        assert_eq!(quantize_one16(f32::NAN, 1.0), 32767);
        assert_eq!(quantize_one16(7.0, 0.0), 0);
        assert_eq!(scale16(&[0.0, f32::NAN]), (0.0, 0.0));
    }

    #[test]
    fn strided_values_land_every_stride_as_far_as_the_slots_go() {
        let mut next = lcg(0x57_41de);
        for (n, stride, len) in [
            (16, 1, 16),
            (16, 7, 106),
            (16, 7, 105),
            (13, 3, 40),
            (5, 4, 3),
            (3, 0, 9),
        ] {
            let x: std::vec::Vec<f32> = (0..n)
                .map(|_| (next() >> 8) as f32 / 65_536.0 - 128.0)
                .collect();
            let inv = scale8(&x).1;
            let mut q = std::vec![99i8; len];
            quantize_strided(&x, inv, &mut q, stride);
            for (j, &got) in q.iter().enumerate() {
                let i = j.checked_div(stride).filter(|i| j % stride == 0 && *i < n);
                let want = i.map_or(99, |i| quantize_one8(x[i], inv));
                assert_eq!(got, want, "n {n} stride {stride} len {len} slot {j}");
            }
        }
    }

    #[test]
    fn int16_vectors_equal_their_values_one_by_one_with_nans_and_infinities() {
        let odd = [
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            1e-45,
            -3e-39,
            f32::MAX,
            -f32::MAX,
        ];
        let mut next = lcg(0x16_5eed);
        for case in 0..20_000 {
            let n = (next() % 40) as usize;
            let x: std::vec::Vec<f32> = (0..n)
                .map(|_| match next() % 16 {
                    0 if case % 4 == 0 => odd[(next() % odd.len() as u32) as usize],
                    1 => f32::from_bits(next()),
                    2 if case % 8 == 1 => 1e-40 * (next() % 1000) as f32,
                    _ => (next() >> 8) as f32 / 65_536.0 - 128.0,
                })
                .collect();
            let (scale, inv) = scale16(&x);
            let mut words = [0u32; 20];
            let q = quantize16(&x, bytemuck::cast_slice_mut(&mut words));
            assert_eq!((q.wide.len(), q.scale.to_bits()), (n, scale.to_bits()));
            for (c, &v) in x.iter().enumerate() {
                assert_eq!(q.wide.get(c), quantize_one16(v, inv) as i32, "{c} {x:?}");
            }
        }
    }

    #[test]
    fn lanes_are_the_values_sign_extended_in_pairs() {
        let mut words = [0u32; 6];
        let buf: &mut [i8] = bytemuck::cast_slice_mut(&mut words);
        let qx = quantize(&[-1.0, 0.5, 0.25, -0.75], buf);
        assert_eq!(qx.q, &[-127, 64, 32, -95]);
        let lane = |a: i8, b: i8| (a as i16 as u16 as u32) | (b as i16 as u16 as u32) << 16;
        assert_eq!(qx.lanes, &[lane(-127, 32), lane(64, -95)]);
        let mut short = [0i8; 8];
        assert!(quantize(&[1.0; 4], &mut short[..6]).lanes.is_empty());
        assert!(quantize(&[1.0; 3], buf).lanes.is_empty());
    }

    #[test]
    fn int4_ordered_lanes_pair_columns_four_apart_in_each_eight() {
        let mut next = lcg(0x14_0e8d);
        for n in (4..=40).step_by(4) {
            let x: std::vec::Vec<f32> = (0..n)
                .map(|_| (next() >> 8) as f32 / 65_536.0 - 128.0)
                .collect();
            let mut buf = std::vec![0u32; n];
            let q = quantize_i4(&x, bytemuck::cast_slice_mut(&mut buf));
            let inv = scale8(&x).1;
            let v: std::vec::Vec<i8> = x.iter().map(|&x| quantize_one8(x, inv)).collect();
            assert_eq!((q.q, q.scale), (&v[..], scale8(&x).0));
            let mut want = std::vec::Vec::new();
            for e in v.chunks(8) {
                match e {
                    [a, b, c, d, e, f, g, h] => want.extend([
                        lane_pair(*a, *e),
                        lane_pair(*b, *f),
                        lane_pair(*c, *g),
                        lane_pair(*d, *h),
                    ]),
                    [a, b, c, d] => want.extend([lane_pair(*a, *c), lane_pair(*b, *d)]),
                    _ => unreachable!(),
                }
            }
            assert_eq!(q.lanes, &want[..], "n {n}");
        }
    }

    #[test]
    fn scale_is_the_largest_magnitude_over_127_nans_ignored() {
        let x = [0.5f32, -3.0, f32::NAN, 2.0, 1.0, -0.25, 2.5, f32::NAN, -7.5];
        for n in 0..=x.len() {
            let want = x[..n]
                .iter()
                .filter(|v| !v.is_nan())
                .fold(0.0f32, |m, v| m.max(v.abs()));
            assert_eq!(scale8(&x[..n]).0, want / 127.0, "n {n}");
        }
    }

    #[test]
    fn integer_maximum_equals_the_float_comparisons() {
        let odd = [
            0.0f32,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-45,
            -1e-45,
            f32::MAX,
            f32::MIN_POSITIVE,
            1.0,
            -1.0,
        ];
        let mut next = lcg(0x0bad_5eed);
        for case in 0..20_000 {
            let n = (next() % 70) as usize;
            let x: std::vec::Vec<f32> = (0..n)
                .map(|_| match next() % 8 {
                    0 => odd[(next() % odd.len() as u32) as usize],
                    1 => f32::from_bits(next()),
                    _ => (next() >> 8) as f32 / 65_536.0 - 128.0,
                })
                .filter(|v| case % 2 == 0 || !v.is_nan())
                .collect();
            let want = crate::math::max_of(x.iter().map(|v| libm::fabsf(*v)), 0.0);
            assert_eq!(max_abs(&x).to_bits(), want.to_bits(), "{x:?}");
        }
    }

    #[test]
    fn int8_activations_round_to_nearest_even_within_the_symmetric_range() {
        // Every f32 in [-127.49, 127.49] against `rintf` (ties to even), inverse 1.
        let mut bits = 0u32;
        while f32::from_bits(bits) < 127.49 {
            for y in [f32::from_bits(bits), -f32::from_bits(bits)] {
                assert_eq!(quantize_one8(y, 1.0) as f32, libm::rintf(y), "{y}");
            }
            bits += 1;
        }
        assert_eq!((quantize_one8(2.5, 1.0), quantize_one8(-3.5, 1.0)), (2, -4));
        // Vectors with their own inverse stay within -127..=127, the maximum at the end.
        let mut next = lcg(0x5ca1_e008);
        for n in 1..200 {
            let x: std::vec::Vec<f32> = (0..n)
                .map(|_| f32::from_bits(next() & 0xbfff_ffff))
                .collect();
            let (scale, inv) = scale8(&x);
            // Room for the lanes: given when `n` is whole groups of four.
            let mut buf = std::vec![0u32; n];
            let q = quantize(&x, bytemuck::cast_slice_mut(&mut buf));
            assert_eq!(q.scale, scale);
            assert_eq!(q.lanes.len(), if n % 4 == 0 { n / 2 } else { 0 });
            for (lanes, v) in q.lanes.chunks_exact(2).zip(q.q.chunks_exact(4)) {
                assert_eq!(lanes, [lane_pair(v[0], v[2]), lane_pair(v[1], v[3])]);
                let word = u32::from_le_bytes([v[0] as u8, v[1] as u8, v[2] as u8, v[3] as u8]);
                assert_eq!(lanes[0], crate::arch::sxtb16(word));
            }
            for (&q, &x) in q.q.iter().zip(&x) {
                assert_eq!(q, quantize_one8(x, inv));
                assert!((-127..=127).contains(&q), "{x} * {inv}");
                assert!((q as f32 * scale - x).abs() <= 0.5 * scale * 1.0001, "{x}");
            }
            assert_eq!(q.q.iter().map(|q| q.unsigned_abs()).max(), Some(127));
        }
        // With a NaN or an infinity (the saturating loop), lanes as the values' own.
        for odd in [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let x = [0.5, odd, -2.0, 1.25, 3.0, -0.75, 0.0, 9.0];
            let mut buf = [0u32; 8];
            let q = quantize(&x, bytemuck::cast_slice_mut(&mut buf));
            let inv = scale8(&x).1;
            for (&q, &x) in q.q.iter().zip(&x) {
                assert_eq!(q, quantize_one8(x, inv), "{odd}");
            }
            for (lanes, v) in q.lanes.chunks_exact(2).zip(q.q.chunks_exact(4)) {
                assert_eq!(lanes, [lane_pair(v[0], v[2]), lane_pair(v[1], v[3])]);
            }
        }
        // An all-zero vector, a subnormal maximum (the inverse held finite) and NaN.
        let mut buf = [5i8; 3];
        let qx = quantize(&[0.0; 3], &mut buf);
        assert_eq!((qx.q, qx.scale), (&[0i8; 3][..], 0.0));
        let qx = quantize(&[3e-37, 0.0, -1e-45], &mut buf);
        assert_eq!((scale8(&[1e-45]).1, qx.q), (f32::MAX, &[102i8, 0, 0][..]));
        assert!([127, -128].contains(&quantize_one8(f32::NAN, 1.0)));
    }
}
