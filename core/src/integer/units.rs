//! Int4 matrices in the integer arithmetic: each group of [`I4_GROUP`] columns of a row has its own
//! scale `s_g` (the blob's `f16`), which the plan holds as an integer multiple `u_g` of one unit per
//! row, `s_g ~ u_g t_r` with `t_r = max_g s_g / UNIT_MAX` and `u_g = round(s_g / t_r)` (so `u_g` is in
//! `0..=UNIT_MAX`, the row's largest group at `UNIT_MAX`). A row's exact sum is then one integer,
//! `sum_g u_g (sum_{c in g} w_c x_c)` at the scale `t_r s_x`, and its [`super::plan::Row`] takes it on
//! as an int8 row's. Replacing `s_g` by `u_g t_r` moves a weight by at most `8 t_r / 2 = s_max / 256`.
//!
//! The sums are exact in `i32`: `|w x| <= 8 * 128`, a group's sum at most `2^15`, times `u_g < 2^10`,
//! over at most [`MAX_GROUPS`] groups: below `2^31`.

use crate::arch::{nibble, nibbles_dot};
use crate::blob::dtype::I4_GROUP;

/// The largest group multiplier (10 bits).
pub const UNIT_MAX: u16 = 1023;
/// The most groups a row may have: `2^15 * 1023 * 64 < 2^31`.
pub const MAX_GROUPS: usize = 64;
/// The widest int4 row the integer arithmetic takes.
pub const MAX_COLS: usize = MAX_GROUPS * I4_GROUP;

/// The group multipliers of one int4 matrix: `u16` little-endian, row-major, `groups` per row.
#[derive(Clone, Copy, Debug)]
pub struct Units<'a> {
    bytes: &'a [u8],
    groups: usize,
}

impl<'a> Units<'a> {
    /// The multipliers in `bytes` of a matrix with `groups` groups per row.
    pub const fn new(bytes: &'a [u8], groups: usize) -> Self {
        Units { bytes, groups }
    }

    /// `u_g` of row `r` (0 past the end).
    #[inline(always)]
    pub fn get(&self, r: usize, g: usize) -> i32 {
        let at = 2 * (r * self.groups + g);
        match self.bytes.get(at..at + 2) {
            Some(b) if g < self.groups => i32::from(u16::from_le_bytes([b[0], b[1]])),
            _ => 0,
        }
    }
}

/// Words of the multipliers of a `[rows, cols]` int4 matrix (two per word, the last padded).
pub const fn words(rows: usize, cols: usize) -> usize {
    rows.saturating_mul(cols.div_ceil(I4_GROUP)).div_ceil(2)
}

/// `out[r] = sum_g u_g (sum_{c in g} w[r][c] x[c])` over the packed int4 rows of `data` (`[rows,
/// cols]`, each row `ceil(cols / 2)` bytes), exact; returns the outputs written. Rows or columns the
/// data lacks count as zeros. Out of line: its frame is on the stack only while it runs.
#[inline(never)]
pub fn sums<'o>(
    data: &[u8],
    [rows, cols]: [usize; 2],
    units: &Units<'_>,
    x: &[i8],
    out: &'o mut [i32],
) -> &'o mut [i32] {
    let x = &x[..cols.min(x.len())];
    let row_bytes = cols.div_ceil(2);
    let n = rows.min(out.len());
    let out = &mut out[..n];
    // Every row there, in whole aligned words: the word path.
    let whole = data.get(..n * row_bytes).filter(|_| cols % 8 == 0 && n > 0);
    if let Some(Ok(words)) = whole.map(bytemuck::try_cast_slice::<u8, u32>) {
        word_rows(words, cols / 8, units, x, out);
        return out;
    }
    let mut rows = data.chunks(row_bytes.max(1));
    for (r, o) in out.iter_mut().enumerate() {
        let row = rows.next().unwrap_or(&[]);
        let mut acc = 0i32;
        for (g, xg) in x.chunks(I4_GROUP).enumerate() {
            let group = nibbles_dot(row, g * I4_GROUP, xg);
            acc = acc.wrapping_add(units.get(r, g).wrapping_mul(group));
        }
        *o = acc;
    }
    out
}

/// [`sums`] over rows of whole words (`row_words` each, 4-byte aligned), two rows a pass (each input
/// loaded once for both): each word's eight nibbles sign-extended by two shifts (one `SBFX` on
/// ARMv7-M) against the int8 inputs of their columns.
#[inline(always)]
fn word_rows(words: &[u32], row_words: usize, units: &Units<'_>, x: &[i8], out: &mut [i32]) {
    const GROUP_WORDS: usize = I4_GROUP / 8;
    let row_words = row_words.max(1);
    let nibble = |w: u32, j: usize| ((w << (28 - 4 * j)) as i32) >> 28;
    for (q, (o, pair)) in out
        .chunks_mut(2)
        .zip(words.chunks(2 * row_words))
        .enumerate()
    {
        let (r0, r1) = pair.split_at(row_words.min(pair.len()));
        let mut total = [0i32; 2];
        let groups = x.chunks(I4_GROUP).enumerate();
        for (g, xg) in groups {
            let span = g * GROUP_WORDS..;
            let (w0, w1) = (r0.get(span.clone()), r1.get(span));
            let (w0, w1) = (w0.unwrap_or(&[]), w1.unwrap_or(&[]));
            let mut acc = [0i32; 2];
            for (k, x8) in xg.chunks_exact(8).enumerate().take(GROUP_WORDS) {
                let (a, b) = (w0.get(k).copied(), w1.get(k).copied());
                let (a, b) = (u32::from_le(a.unwrap_or(0)), u32::from_le(b.unwrap_or(0)));
                if let Some(x8) = x8.first_chunk::<8>() {
                    for (j, &xj) in x8.iter().enumerate() {
                        acc[0] += nibble(a, j) * i32::from(xj);
                        acc[1] += nibble(b, j) * i32::from(xj);
                    }
                }
            }
            for (i, (t, acc)) in total.iter_mut().zip(acc).enumerate() {
                *t = t.wrapping_add(units.get(2 * q + i, g).wrapping_mul(acc));
            }
        }
        for (o, t) in o.iter_mut().zip(total) {
            *o = t;
        }
    }
}

/// Value `c` of row `r` at the row's unit: `w[r][c] u_g` (its nibble times its group's multiplier).
#[inline]
pub fn value(data: &[u8], cols: usize, units: &Units<'_>, r: usize, c: usize) -> i32 {
    let row = data.get(r * cols.div_ceil(2)..).unwrap_or(&[]);
    nibble(row, c) * units.get(r, c / I4_GROUP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::lcg;

    #[test]
    fn sums_are_the_units_times_the_groups_exact_sums_at_the_extremes() {
        let mut next = lcg(5);
        for (rows, cols) in [(3, 64), (2, 172), (1, 31), (2, 40), (2, MAX_COLS)] {
            let row_bytes = cols.div_ceil(2);
            let mut data: std::vec::Vec<u8> = (0..rows * row_bytes).map(|_| next() as u8).collect();
            // Row 0 all -8 against x all -128, every unit UNIT_MAX: the largest sum.
            data[..row_bytes].fill(0x88);
            let groups = cols.div_ceil(I4_GROUP);
            let mut ub = std::vec::Vec::new();
            for r in 0..rows {
                for _ in 0..groups {
                    let u = if r == 0 {
                        UNIT_MAX
                    } else {
                        (next() % 1024) as u16
                    };
                    ub.extend_from_slice(&u.to_le_bytes());
                }
            }
            let units = Units::new(&ub, groups);
            let x: std::vec::Vec<i8> = (0..cols)
                .map(|c| if c % 3 == 0 { -128 } else { next() as i8 })
                .collect();
            // The data at a word boundary (the whole-word path where `cols % 8 == 0`) and one byte
            // past it (the byte path): the same sums.
            let mut words = std::vec![0u32; data.len() / 4 + 2];
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
            bytes[..data.len()].copy_from_slice(&data);
            let mut out = std::vec![0i32; rows + 1];
            let got = sums(&bytes[..data.len()], [rows, cols], &units, &x, &mut out).to_vec();
            bytes.copy_within(..data.len(), 1);
            let mut shifted = std::vec![0i32; rows + 1];
            let at_odd = sums(
                &bytes[1..=data.len()],
                [rows, cols],
                &units,
                &x,
                &mut shifted,
            );
            assert_eq!(at_odd, got.as_slice(), "{rows}x{cols}");
            for (r, &got) in got.iter().enumerate() {
                let want: i64 = (0..cols)
                    .map(|c| {
                        let w = nibble(&data[r * row_bytes..], c);
                        i64::from(w) * i64::from(x[c]) * i64::from(units.get(r, c / I4_GROUP))
                    })
                    .sum();
                assert_eq!(i64::from(got), want, "{rows}x{cols} row {r}");
                for c in [0, cols / 2, cols - 1] {
                    let w = nibble(&data[r * row_bytes..], c);
                    assert_eq!(
                        value(&data, cols, &units, r, c),
                        w * units.get(r, c / I4_GROUP)
                    );
                }
            }
        }
    }

    #[test]
    fn the_widest_row_s_largest_sum_fits_an_i32() {
        let largest = 8i64 * 128 * I4_GROUP as i64 * i64::from(UNIT_MAX) * MAX_GROUPS as i64;
        assert!(largest <= i64::from(i32::MAX), "{largest}");
    }

    #[test]
    fn missing_units_and_data_read_as_zero() {
        let units = Units::new(&[1, 0], 1);
        assert_eq!(
            (units.get(0, 0), units.get(0, 1), units.get(1, 0)),
            (1, 0, 0)
        );
        let mut out = [7i32; 2];
        assert_eq!(sums(&[], [2, 32], &units, &[1; 32], &mut out), &[0, 0]);
    }
}
