//! The int4 matrix-vector kernel: packed int4 rows (eight nibbles per little-endian word, column `c + k`
//! in bits `4k .. 4k + 4`) against int8 or int16 activations, two rows per pass, each group of
//! [`I4_GROUP`] columns summed exactly in `i32`, then scaled and added in order in `f32`.
//!
//! The nibbles are never widened one by one. A word's eight nibbles become four words of signed 16-bit
//! lanes ([`unpack`]: one `AND` of the word shifted by 12, 8, 4 or 0 with `0xf000f000`, which puts
//! nibbles `k` and `k + 4` in the top four bits of the two lanes, `4096 * w` each) that `SMLAD`
//! multiplies with the activation lanes of the same columns ([`arrange`]: the int8 kernel's lanes
//! repacked so that lanes four columns apart pair up; in place, once per input vector, by
//! `quant::linear::Input`, which records their order). The group's sum is `4096 * acc`,
//! exact (at most `32 * 8 * 128 * 4096 = 2^27`), and `4096` is divided out exactly. Int16 activations
//! would overflow that factor, so they meet nibbles scaled by 16 ([`unpack16`], `SXTB16` on the
//! nibbles moved into the high half of their bytes), their lanes arranged here, eight columns at a
//! time (W4A16 is not a speed target).
//!
//! On cores with the DSP instructions and an FPU, int8 activations run one assembly loop (through the
//! kernels' facade, `crate::arch`): per eight columns one `LDMIA` of the four activation lanes for both rows, then per
//! row `LDR`, four `AND` and four `SMLAD`: 19 instructions per 16 multiply-accumulates. Per pass it
//! converts the group sums with `VCVT.F32.S32 #12` (the division by 4096, exact), widens the `f16`
//! scales with `VCVTB`/`VCVTT` and adds `sum * scale` with `VMLA.F32` (product rounded, then the sum:
//! the portable `t += a * s`). Elsewhere the same sums in plain Rust on the instructions of `crate::arch`.

use super::groups;
use super::quantized::Quantized;
use crate::arch::{smlad, sxtb16, sxtb16_ror8};
use crate::blob::{decode_finite_scale, I4_GROUP, SCALE_BYTES};

/// The top nibble of each 16-bit lane.
const MASK: u32 = 0xf000_f000;

/// Rows per pass.
const ROWS: usize = 2;

/// Activation lanes per group: two 16-bit lanes per word.
const GROUP_LANES: usize = I4_GROUP / 2;

/// Packed words per group: eight nibbles per word.
const GROUP_WORDS: usize = I4_GROUP / 8;

/// The activation lanes of eight columns `c .. c + 8` in the order [`unpack`] splits a word of weights:
/// from the int8 kernel's `[x0, x2]`, `[x1, x3]`, `[x4, x6]`, `[x5, x7]`
/// ([`Quantized::lanes`]) to `[x0, x4]`, `[x1, x5]`, `[x2, x6]`, `[x3, x7]` (`PKHBT`/`PKHTB`). It is its
/// own inverse.
#[inline(always)]
pub(crate) fn arrange(l: [u32; 4]) -> [u32; 4] {
    [
        (l[0] & 0xffff) | (l[2] << 16),
        (l[1] & 0xffff) | (l[3] << 16),
        (l[0] >> 16) | (l[2] & 0xffff_0000),
        (l[1] >> 16) | (l[3] & 0xffff_0000),
    ]
}

/// [`arrange`] of every whole eight columns' lanes in place: from the int8 kernel's order to this
/// kernel's, or back.
pub(crate) fn rearrange(lanes: &mut [u32]) {
    for l in lanes.chunks_exact_mut(4) {
        let a = arrange([l[0], l[1], l[2], l[3]]);
        l.copy_from_slice(&a);
    }
}

/// The eight nibbles `w_k` of a packed word as four words of signed 16-bit lanes `4096 * w_k`:
/// `[w0, w4]`, `[w1, w5]`, `[w2, w6]`, `[w3, w7]`. Each is the word shifted left by 12, 8, 4 or 0 and
/// masked to the top nibble of each lane, whose sign bit is then the nibble's.
#[inline(always)]
pub(crate) fn unpack(w: u32) -> [u32; 4] {
    [(w << 12) & MASK, (w << 8) & MASK, (w << 4) & MASK, w & MASK]
}

/// [`unpack`] with lanes `16 * w_k`, for int16 activations: the nibbles moved into the high half of
/// their bytes (even columns `(w << 4) & 0xf0f0f0f0`, odd ones `w & 0xf0f0f0f0`), then sign-extended
/// by `SXTB16` (bytes 0 and 2; with `ROR 8`, 1 and 3).
#[inline(always)]
pub(crate) fn unpack16(w: u32) -> [u32; 4] {
    let (even, odd) = ((w << 4) & 0xf0f0_f0f0, w & 0xf0f0_f0f0);
    [
        sxtb16(even),
        sxtb16(odd),
        sxtb16_ror8(even),
        sxtb16_ror8(odd),
    ]
}

/// `out[r] = (sum_g acc_g * s_w[r][g]) * s_x` for the rows of an int4 matrix of `cols` columns (whole
/// groups, `cols % I4_GROUP == 0`) against `x`, two rows per pass: exactly what `int4::dot` gives for
/// each row, for every scale `Model::from_bytes` accepts (finite, positive). `x` is int8 with its
/// [`Quantized::lanes`] [`rearrange`]d into this kernel's order, or int16 with its lanes as they are
/// (arranged here, eight columns at a time). Returns the rows done (a multiple of 2, 0 without lanes;
/// the caller does the rest).
pub(crate) fn matvec4(
    data: &[u8],
    cols: usize,
    scales: &[u8],
    x: &Quantized<'_>,
    out: &mut [f32],
) -> usize {
    // Little-endian words (as the blob and the lanes are), whole groups, lanes for every column.
    let Some(words) = groups::kernel_words(data, cols, I4_GROUP, x.lanes.len()) else {
        return 0;
    };
    let (groups, row_words) = (cols / I4_GROUP, cols / 8);
    // The rows whose words and scales are all there, in pairs.
    let rows = out
        .len()
        .min(words.len() / row_words)
        .min(scales.len() / (groups * SCALE_BYTES))
        / ROWS
        * ROWS;
    if rows == 0 {
        return 0;
    }
    let (words, out) = (&words[..rows * row_words], &mut out[..rows]);
    if !x.wide.is_empty() {
        rows2(words, groups, scales, x, out, (arrange, unpack16, 4));
        return rows;
    }
    if crate::arch::int4_matvec8(words, groups, scales, x.lanes, x.scale, out) {
        return rows;
    }
    rows2(words, groups, scales, x, out, (|l| l, unpack, 12));
    rows
}

/// How [`rows2`] meets a word: the lanes of its eight columns put in order, the word split into
/// lanes `2^shift * w_k`, and `shift`.
type Split<A, U> = (A, U, u32);

/// The portable kernel: two rows per pass over `words` (whole rows of `groups` groups, `out.len()` of
/// them, even).
#[inline(always)]
fn rows2(
    words: &[u32],
    groups: usize,
    scales: &[u8],
    x: &Quantized<'_>,
    out: &mut [f32],
    (order, unpack, shift): Split<impl Fn([u32; 4]) -> [u32; 4], impl Fn(u32) -> [u32; 4]>,
) {
    let row_words = groups * GROUP_WORDS;
    let rows = words.chunks_exact(ROWS * row_words);
    for (q, (o, pair)) in out.chunks_exact_mut(ROWS).zip(rows).enumerate() {
        let (r0, r1) = pair.split_at(row_words);
        let mut total = [0.0f32; ROWS];
        let per_group = r0
            .chunks_exact(GROUP_WORDS)
            .zip(r1.chunks_exact(GROUP_WORDS));
        for (g, ((w0, w1), l)) in per_group.zip(x.lanes.chunks_exact(GROUP_LANES)).enumerate() {
            let mut acc = [0i32; ROWS];
            for ((&w0, &w1), l) in w0.iter().zip(w1).zip(l.chunks_exact(4)) {
                let l = order([l[0], l[1], l[2], l[3]]);
                for (acc, w) in acc.iter_mut().zip([w0, w1]) {
                    *acc = unpack(w)
                        .into_iter()
                        .zip(l)
                        .fold(*acc, |acc, (w, x)| smlad(w, x, acc));
                }
            }
            for (r, (t, acc)) in total.iter_mut().zip(acc).enumerate() {
                let at = ((ROWS * q + r) * groups + g) * SCALE_BYTES;
                let s = decode_finite_scale(scales.get(at..).unwrap_or(&[]));
                *t += (acc >> shift) as f32 * s;
            }
        }
        for (o, t) in o.iter_mut().zip(total) {
            *o = t * x.scale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::activations::{quantize, quantize16, quantized};
    use crate::quant::int4::{dot, dot_wide, nibble};
    use std::vec::Vec;

    /// A xorshift stream.
    fn stream(mut s: u32) -> impl FnMut() -> u32 {
        move || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            s
        }
    }

    #[test]
    fn arrange_pairs_lanes_four_columns_apart_and_undoes_itself() {
        let lane = |a: u32, b: u32| a | b << 16;
        let l = [lane(0, 2), lane(1, 3), lane(4, 6), lane(5, 7)];
        let want = [lane(0, 4), lane(1, 5), lane(2, 6), lane(3, 7)];
        assert_eq!(arrange(l), want);
        assert_eq!(arrange(want), l);
    }

    #[test]
    fn unpacked_lanes_are_the_nibbles_times_4096_and_16() {
        let mut next = stream(0x1234_5678);
        let words = (0..2000)
            .map(|_| next())
            .chain([0, u32::MAX, 0x8888_8888, 0x7777_7777]);
        for w in words {
            let bytes = w.to_le_bytes();
            let n = |k: usize| nibble(&bytes, k);
            for (scale, lanes) in [(4096, unpack(w)), (16, unpack16(w))] {
                for (j, l) in lanes.iter().enumerate() {
                    let (lo, hi) = (*l as u16 as i16 as i32, (*l >> 16) as u16 as i16 as i32);
                    assert_eq!((lo, hi), (scale * n(j), scale * n(j + 4)), "{w:#x} {j}");
                }
            }
        }
    }

    /// `x` quantised to int8 into `buf`, its lanes in this kernel's order.
    fn int8_lanes<'q>(x: &[f32], buf: &'q mut [u32]) -> Quantized<'q> {
        let n = x.len();
        let scale = quantize(x, bytemuck::cast_slice_mut(buf)).scale;
        rearrange(&mut buf[n / 4..n / 4 + n / 2]);
        quantized(bytemuck::cast_slice(buf), n, scale)
    }

    /// A random int4 matrix (every nibble value, `-8` and `7` included) with random scales, and
    /// random int8 activations reaching `+-127`.
    fn case(seed: u32, rows: usize, cols: usize) -> (Vec<u32>, Vec<u8>, Vec<f32>) {
        let mut next = stream(seed);
        let mut words: Vec<u32> = (0..rows * cols / 8).map(|_| next()).collect();
        // Extreme rows: all -8, all 7.
        words[..cols / 8].fill(0x8888_8888);
        if rows > 1 {
            words[cols / 8..2 * cols / 8].fill(0x7777_7777);
        }
        let scales: Vec<u8> = (0..rows * cols / I4_GROUP)
            .flat_map(|_| {
                let s = half::f16::from_bits((next() % 0x7bff + 1) as u16).to_f32();
                crate::blob::encode_scale(s).unwrap()
            })
            .collect();
        let x: Vec<f32> = (0..cols)
            .map(|i| match i % 7 {
                0 => 3.0,
                1 => -3.0,
                _ => (next() % 2001) as f32 / 1000.0 - 1.0,
            })
            .collect();
        (words, scales, x)
    }

    #[test]
    fn two_rows_per_pass_equal_row_by_row_bit_for_bit() {
        for (seed, rows, cols) in [(1, 9, 96), (2, 8, 64), (3, 2, 32), (4, 5, 256), (5, 1, 64)] {
            let (words, scales, x) = case(seed, rows, cols);
            let data: &[u8] = bytemuck::cast_slice(&words);
            for wide in [false, true] {
                let mut buf = std::vec![0u32; cols];
                let q = match wide {
                    false => int8_lanes(&x, &mut buf),
                    true => quantize16(&x, bytemuck::cast_slice_mut(&mut buf)),
                };
                let mut out = std::vec![9.0f32; rows + 1];
                let done = matvec4(data, cols, &scales, &q, &mut out[..rows]);
                assert_eq!(done, rows / 2 * 2);
                for (r, o) in out.iter().enumerate().take(done) {
                    let row = &data[r * cols / 2..(r + 1) * cols / 2];
                    let scale = |g: usize| {
                        let at = (r * cols / I4_GROUP + g) * SCALE_BYTES;
                        decode_finite_scale(&scales[at..])
                    };
                    let want = match wide {
                        false => dot(row, 0, q.q, scale),
                        true => dot_wide(row, 0, cols, q.wide, scale),
                    } * q.scale;
                    assert_eq!(
                        o.to_bits(),
                        want.to_bits(),
                        "{rows}x{cols} wide {wide} row {r}"
                    );
                }
                assert!(out[done..].iter().all(|&o| o == 9.0));
            }
        }
    }

    #[test]
    fn partial_groups_and_missing_lanes_are_left_to_the_caller() {
        let (words, scales, x) = case(7, 4, 64);
        let data: &[u8] = bytemuck::cast_slice(&words);
        let mut buf = std::vec![0u32; 64];
        let q = int8_lanes(&x, &mut buf);
        let mut out = [0.0f32; 4];
        // 40 columns: not whole groups.
        assert_eq!(matvec4(data, 40, &scales, &q, &mut out), 0);
        let short = Quantized {
            lanes: &q.lanes[..8],
            ..q
        };
        assert_eq!(matvec4(data, 64, &scales, &short, &mut out), 0);
        // Scales for three rows only: one pair.
        assert_eq!(matvec4(data, 64, &scales[..12], &q, &mut out), 2);
    }
}
