//! The int4 x int8 dot product: packed symmetric int4 weights (two per byte, low nibble first) in groups
//! of [`I4_GROUP`] along a row, each group with its own scale, against int8 or int16 activations.

use super::activations::Wide;
use super::dsp::{smlad, sxtb16, sxtb16_ror8};
use crate::blob::{decode_finite_scale, I4_GROUP, SCALE_BYTES};

/// Nibble `c` of a packed row, sign-extended: the low nibble of byte `c / 2` for even `c`, the high one
/// for odd `c`. Missing bytes read as 0.
#[inline]
pub fn nibble(row: &[u8], c: usize) -> i32 {
    let b = row.get(c / 2).copied().unwrap_or(0);
    let n = if c % 2 == 1 { b >> 4 } else { b & 0x0f };
    ((n << 4) as i8 >> 4) as i32
}

/// `sum_g (acc_g * scale(g))` over the groups met by columns `c0 .. c0 + x.len()` of one packed row, with
/// `acc_g = sum_c w[c] * x[c]` exact in `i32` and the groups added in order. `scale(g)` is the scale of
/// group `g` of the row.
pub fn dot(row: &[u8], c0: usize, x: &[i8], scale: impl Fn(usize) -> f32) -> f32 {
    let mut total = 0.0f32;
    let mut start = 0;
    while start < x.len() {
        let c = c0 + start;
        let end = (x.len()).min(start + I4_GROUP - c % I4_GROUP);
        total += dot_i32(row, c, &x[start..end]) as f32 * scale(c / I4_GROUP);
        start = end;
    }
    total
}

/// [`dot`] against int16 activations: columns `c0 .. c0 + n` of one packed row times `x.get(c0 + i)`
/// ([`Wide`]), each group's sum exact in `i32` (`32 * 8 * 32767 < 2^23`), scaled and added in order.
pub fn dot_wide(row: &[u8], c0: usize, n: usize, x: Wide<'_>, scale: impl Fn(usize) -> f32) -> f32 {
    let mut total = 0.0f32;
    let mut start = c0;
    let end = c0.saturating_add(n);
    while start < end {
        let stop = end.min((start / I4_GROUP + 1) * I4_GROUP);
        let acc = (start..stop).fold(0i32, |acc, c| acc + nibble(row, c) * x.get(c));
        total += acc as f32 * scale(start / I4_GROUP);
        start = stop;
    }
    total
}

/// `sum_i w[c + i] * x[i]` in `i32`, two nibbles per byte where `c` is even; called with at most one
/// group (`|w x| <= 1024`, so any length up to 2^21 is exact).
fn dot_i32(row: &[u8], c: usize, x: &[i8]) -> i32 {
    let (mut acc, mut x, mut c) = (0i32, x, c);
    if c % 2 == 1 {
        if let Some((&first, rest)) = x.split_first() {
            acc += nibble(row, c) * first as i32;
            (x, c) = (rest, c + 1);
        }
    }
    let bytes = row.get(c / 2..).unwrap_or(&[]);
    let pairs = x.chunks_exact(2);
    let last = pairs
        .remainder()
        .first()
        .map(|&xi| nibble(row, c + x.len() - 1) * xi as i32);
    for (&b, p) in bytes.iter().zip(pairs) {
        let (lo, hi) = (((b << 4) as i8 >> 4) as i32, (b as i8 >> 4) as i32);
        acc += lo * p[0] as i32 + hi * p[1] as i32;
    }
    acc + last.unwrap_or(0)
}

/// `out[r] = (sum_g acc_g * s_w[r][g]) * s_x` for two rows at a time of an int4 matrix of `cols`
/// columns (whole groups, `cols % I4_GROUP == 0`) against int8 (or int16) activations given as their
/// [`Quantized::lanes`](super::activations::Quantized::lanes) (`[x0, x2]`, `[x1, x3]` per four columns),
/// exactly as [`dot`] of every row; returns the rows done (a multiple of 2; the caller does the rest).
///
/// Per word of a row (eight nibbles, columns `c .. c + 8`) the nibbles are moved into the high half of
/// their bytes by two masks, `(w << 4) & 0xf0f0f0f0` (the even columns) and `w & 0xf0f0f0f0` (the odd
/// ones), so that `SXTB16` gives 16-bit lanes of `16 * nibble`: `[w_c, w_c+4]`, `[w_c+2, w_c+6]`,
/// `[w_c+1, w_c+5]`, `[w_c+3, w_c+7]`, met by the activations' lanes repacked once per two rows in that
/// order; four `SMLAD`s per word. The group's sum is `16 * acc_g`, exact (at most `32 * 128 * 127 * 16`),
/// and shifted back down exactly.
pub(crate) fn matvec4(
    data: &[u8],
    cols: usize,
    scales: &[u8],
    lanes: &[u32],
    s_x: f32,
    out: &mut [f32],
) -> usize {
    let groups = cols / I4_GROUP;
    let row_words = cols / 8;
    let words = match bytemuck::try_cast_slice::<u8, u32>(data) {
        // Little-endian words (as the blob and the lanes are), whole groups, lanes for every column.
        Ok(words)
            if cfg!(target_endian = "little")
                && cols != 0
                && cols % I4_GROUP == 0
                && lanes.len() == cols / 2 =>
        {
            words
        }
        _ => return 0,
    };
    let rows = out.len().min(words.len() / row_words) / ROWS * ROWS;
    const MASK: u32 = 0xf0f0_f0f0;
    // Two rows per pass: with four, the loop's live values (sums, lanes, masks, words) outgrow the
    // registers and spill.
    const ROWS: usize = 2;
    for (q, o) in out[..rows].chunks_exact_mut(ROWS).enumerate() {
        let block: [&[u32]; ROWS] = core::array::from_fn(|k| {
            let start = (ROWS * q + k) * row_words;
            &words[start..start + row_words]
        });
        let [r0, r1] = block.map(|r| r.chunks_exact(I4_GROUP / 8));
        let mut total = [0.0f32; ROWS];
        let groups_of = r0.zip(r1).zip(lanes.chunks_exact(I4_GROUP / 2));
        for (g, ((w0, w1), l)) in groups_of.enumerate() {
            let mut acc = [0i32; ROWS];
            for k in 0..I4_GROUP / 8 {
                let l = &l[4 * k..4 * k + 4];
                let xa = (l[0] & 0xffff) | (l[2] << 16);
                let xb = (l[0] >> 16) | (l[2] & 0xffff_0000);
                let xc = (l[1] & 0xffff) | (l[3] << 16);
                let xd = (l[1] >> 16) | (l[3] & 0xffff_0000);
                for (acc, w) in acc.iter_mut().zip([w0[k], w1[k]]) {
                    let (even, odd) = ((w << 4) & MASK, w & MASK);
                    *acc = smlad(sxtb16(even), xa, *acc);
                    *acc = smlad(sxtb16_ror8(even), xb, *acc);
                    *acc = smlad(sxtb16(odd), xc, *acc);
                    *acc = smlad(sxtb16_ror8(odd), xd, *acc);
                }
            }
            for (r, (t, acc)) in total.iter_mut().zip(acc).enumerate() {
                let at = ((ROWS * q + r) * groups + g) * SCALE_BYTES;
                let s = decode_finite_scale(scales.get(at..).unwrap_or(&[]));
                *t += (acc >> 4) as f32 * s;
            }
        }
        for (o, t) in o.iter_mut().zip(total) {
            *o = t * s_x;
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibbles_are_low_first_and_signed() {
        let row = [0x8f_u8, 0x71];
        assert_eq!(
            (0..4)
                .map(|c| nibble(&row, c))
                .collect::<std::vec::Vec<_>>(),
            [-1, -8, 1, 7]
        );
        assert_eq!(nibble(&row, 9), 0);
    }

    #[test]
    fn groups_are_scaled_separately() {
        // 40 columns: group 0 has 32 weights of 1, group 1 has 8 weights of -2.
        let mut row = [0x11u8; 20];
        row[16..].fill(0xee);
        let x = [1i8; 40];
        let got = dot(&row, 0, &x, |g| [0.5, 0.25][g]);
        assert_eq!(got, 32.0 * 0.5 + -16.0 * 0.25);
        assert_eq!(
            dot(&row, 30, &x[..4], |g| [0.5, 0.25][g]),
            2.0 * 0.5 - 4.0 * 0.25
        );
    }

    #[test]
    fn packed_pairs_equal_nibble_by_nibble() {
        let row: std::vec::Vec<u8> = (0..40u32).map(|i| (i * 37 + 11) as u8).collect();
        let x: std::vec::Vec<i8> = (0..80i32).map(|i| (i * 29 % 255 - 127) as i8).collect();
        for c in 0..9 {
            for n in [0, 1, 2, 5, 32, 71 - c] {
                let want: i32 = (0..n).map(|i| nibble(&row, c + i) * x[i] as i32).sum();
                assert_eq!(dot_i32(&row, c, &x[..n]), want, "c {c} n {n}");
            }
        }
    }

    #[test]
    fn four_rows_equal_row_by_row() {
        use crate::quant::activations::quantize;
        let (cols, rows) = (96, 9);
        let words: std::vec::Vec<u32> = (0..rows * cols / 8)
            .map(|i| (i as u32).wrapping_mul(0x9e37_79b9))
            .collect();
        let data: &[u8] = bytemuck::cast_slice(&words);
        let scales: std::vec::Vec<u8> = (0..rows * cols / I4_GROUP)
            .flat_map(|i| crate::blob::encode_scale(0.25 + i as f32 / 8.0).unwrap())
            .collect();
        let x: std::vec::Vec<f32> = (0..cols).map(|i| ((i * 37) % 23) as f32 - 11.0).collect();
        let mut words = std::vec![0u32; cols];
        let qx = quantize(&x, bytemuck::cast_slice_mut(&mut words));
        let mut out = std::vec![9.0f32; rows];
        let done = matvec4(data, cols, &scales, qx.lanes, qx.scale, &mut out);
        assert_eq!(done, 8);
        for (r, o) in out.iter().enumerate().take(done) {
            let row = &data[r * cols / 2..(r + 1) * cols / 2];
            let scale = |g: usize| {
                let at = (r * cols / I4_GROUP + g) * SCALE_BYTES;
                decode_finite_scale(&scales[at..])
            };
            let want = dot(row, 0, qx.q, scale) * qx.scale;
            assert_eq!(o.to_bits(), want.to_bits(), "row {r}");
        }
        assert_eq!(out[8], 9.0);
    }
}
