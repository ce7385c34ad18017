//! Exact int8 matmuls for the integer-only arithmetic: the `i32` sums `acc_r = W[r] . x` of an `I8` matrix in
//! the blob's quads of rows ([`crate::blob::quads`]) and an int8 input, on the four-row kernel of the
//! target where the input has its lanes, else a row at a time; and the same sums over rows any stride
//! apart (the int8 KV cache's keys), and their transpose, rows weighted and summed (the values mixed by
//! the probabilities). Integer sums: the same bits everywhere.

use super::dot4::{dot4_quads, dot4_strided};
use super::int8::dot_place;
use crate::arch::lane_word;
use crate::blob::quads;

/// Writes `x`'s 16-bit lanes (per group of four `[x0, x2]`, `[x1, x3]`) into `lanes` and returns
/// them: empty unless `x` is whole groups and `lanes` has room for `x.len() / 2` words.
pub fn lanes<'l>(x: &[i8], lanes: &'l mut [u32]) -> &'l [u32] {
    let words = x.len() / 2;
    if x.len() % 4 != 0 || lanes.len() < words {
        return &[];
    }
    for (pair, g) in lanes.chunks_exact_mut(2).zip(x.chunks_exact(4)) {
        pair[0] = lane_word(g[0].into(), g[2].into());
        pair[1] = lane_word(g[1].into(), g[3].into());
    }
    &lanes[..words]
}

/// `out[r] = sum_c W[r][c] x[c]` for `r < min(rows, out.len())` of the `[rows, cols]` `I8` matrix
/// `w` (its blob bytes) and `x` (`cols` values; `lanes` its [`lanes`], or empty). Exact for `cols <=
/// 2^17` (`|acc| < 2^31`); a row past the data sums its missing bytes as zeros.
pub fn matvec(w: &[u8], [rows, cols]: [usize; 2], x: &[i8], lanes: &[u32], out: &mut [i32]) {
    let rows = rows.min(out.len());
    let n = x.len().min(cols);
    let mut done = 0;
    if cols % 4 == 0 && n == cols && lanes.len() == cols / 2 {
        done = rows - rows % quads::QUAD;
        dot4_quads(w, cols, lanes, &mut out[..done]);
    }
    for (r, o) in out.iter_mut().enumerate().take(rows).skip(done) {
        let place = (quads::row_place(rows, cols, r), cols);
        let acc = dot_place(w, place, 0, n, |i| x.get(i).map_or(0, |&v| v.into()));
        *o = acc as i32;
    }
}

/// `out[r] = sum_c rows[r * stride + c] x[c]` (the bytes as `i8`) for `r < out.len()` and `c <
/// x.len()`, `lanes` `x`'s [`lanes`] (or empty): four rows at a time on the target's strided kernel,
/// the rows after the last four one at a time. Bytes past `rows` count as zeros.
pub fn strided(rows: &[u8], stride: usize, x: &[i8], lanes: &[u32], out: &mut [i32]) {
    let quads = match x.len() % 4 == 0 && lanes.len() == x.len() / 2 {
        true => out.len() - out.len() % 4,
        false => 0,
    };
    let (out4, rest) = out.split_at_mut(quads);
    dot4_strided(rows, stride, lanes, out4);
    for (j, o) in rest.iter_mut().enumerate() {
        let at = (quads + j).saturating_mul(stride);
        let row = rows.get(at..).unwrap_or(&[]);
        *o = row.iter().zip(x).fold(0i32, |acc, (&w, &v)| {
            acc.wrapping_add(i32::from(w as i8) * i32::from(v))
        });
    }
}

/// `out[c] = sum_r weights[r] rows[r * stride + c]` (the bytes as `i8`; `i32` sums, wrapping) for `c <
/// out.len()` and `r < weights.len()`: where `stride >= 4`, each row's next four columns read as one
/// word against four sums held across the rows; other columns one at a time. Bytes past `rows` count
/// as zeros.
pub fn weighted_rows(rows: &[u8], stride: usize, weights: &[i32], out: &mut [i32]) {
    let whole = match stride >= 4 {
        true => out.len() - out.len() % 4,
        false => 0,
    };
    let (out4, rest) = out.split_at_mut(whole);
    for (q, sums) in out4.chunks_exact_mut(4).enumerate() {
        let mut acc = [0i32; 4];
        let mut mac = |w: i32, word: u32| {
            for (i, a) in acc.iter_mut().enumerate() {
                let v = i32::from((word >> (8 * i)) as u8 as i8);
                *a = a.wrapping_add(w.wrapping_mul(v));
            }
        };
        // Row r's columns 4q.. start chunk r; a last row cut short is the chunks' remainder.
        let mut full = rows.get(4 * q..).unwrap_or(&[]).chunks_exact(stride);
        let count = full.len();
        let n = count.min(weights.len());
        for (row, &w) in full.by_ref().zip(&weights[..n]) {
            if let Some(&word) = row.first_chunk::<4>() {
                mac(w, u32::from_le_bytes(word));
            }
        }
        if let (Some(&w), true) = (weights.get(n), n == count) {
            let cut = full.remainder();
            let word = (0..4).rev().fold(0, |word, i| {
                word << 8 | cut.get(i).map_or(0, |&b| u32::from(b))
            });
            mac(w, word);
        }
        sums.copy_from_slice(&acc);
    }
    for (j, o) in rest.iter_mut().enumerate() {
        *o = weights.iter().enumerate().fold(0i32, |acc, (r, &w)| {
            let at = r.saturating_mul(stride).saturating_add(whole + j);
            let v = rows.get(at).map_or(0, |&v| v as i8);
            acc.wrapping_add(w.wrapping_mul(v.into()))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::quads::from_row_major;
    use crate::testing::lcg;
    use std::vec::Vec;

    #[test]
    fn the_kernel_and_the_row_loop_give_the_plain_sums() {
        let mut next = lcg(3);
        for (rows, cols) in [(1, 4), (4, 8), (7, 12), (9, 5), (16, 64), (13, 3)] {
            let row_major: Vec<u8> = (0..rows * cols).map(|_| next() as u8).collect();
            let x: Vec<i8> = (0..cols).map(|_| next() as i8).collect();
            let w = from_row_major(rows, cols, &row_major);
            let mut words = std::vec![0u32; cols];
            let l = lanes(&x, &mut words).to_vec();
            for lanes in [&l[..], &[]] {
                let mut out = std::vec![0i32; rows];
                matvec(&w, [rows, cols], &x, lanes, &mut out);
                for (r, o) in out.iter().enumerate() {
                    let want: i32 = (0..cols)
                        .map(|c| i32::from(row_major[r * cols + c] as i8) * i32::from(x[c]))
                        .sum();
                    assert_eq!(*o, want, "{rows}x{cols} row {r}");
                }
            }
        }
    }

    #[test]
    fn the_strided_rows_give_the_plain_sums() {
        let mut next = lcg(11);
        for (rows, stride, n) in [
            (1, 8, 8),
            (4, 8, 8),
            (7, 24, 8),
            (9, 16, 12),
            (13, 8, 5),
            (6, 4, 4),
        ] {
            let bytes: Vec<u8> = (0..rows * stride).map(|_| next() as u8).collect();
            let x: Vec<i8> = (0..n).map(|_| next() as i8).collect();
            let mut words = std::vec![0u32; n];
            let l = lanes(&x, &mut words).to_vec();
            for lanes in [&l[..], &[]] {
                let mut out = std::vec![0i32; rows];
                strided(&bytes, stride, &x, lanes, &mut out);
                for (r, o) in out.iter().enumerate() {
                    let want: i32 = (0..n)
                        .map(|c| i32::from(bytes[r * stride + c] as i8) * i32::from(x[c]))
                        .sum();
                    assert_eq!(*o, want, "{rows} rows, stride {stride}, row {r}");
                }
            }
        }
    }

    #[test]
    fn the_weighted_rows_give_the_plain_sums() {
        let mut next = lcg(5);
        // Whole groups of four columns and a tail; the last row cut short (the bytes past it zeros);
        // weights up to 2^15 and beyond, negative ones (a hook's), one more row than the bytes hold.
        for (rows, stride, start, n, cut) in [
            (1, 8, 0, 8, 0),
            (5, 16, 4, 8, 0),
            (7, 24, 3, 7, 0),
            (9, 16, 0, 16, 5),
            (3, 6, 2, 3, 2),
            (33, 64, 48, 16, 0),
        ] {
            let bytes: Vec<u8> = (0..rows * stride - cut).map(|_| next() as u8).collect();
            let at = |i: usize| bytes.get(i).map_or(0, |&b| i32::from(b as i8));
            for extra in [0, 1] {
                let weights: Vec<i32> = (0..rows + extra)
                    .map(|r| match r % 3 {
                        0 => 32_768,
                        1 => (next() % 32_769) as i32,
                        _ => next() as i32,
                    })
                    .collect();
                let mut out = std::vec![7i32; n];
                weighted_rows(&bytes[start..], stride, &weights, &mut out);
                for (c, o) in out.iter().enumerate() {
                    let want = weights.iter().enumerate().fold(0i32, |acc, (r, &w)| {
                        acc.wrapping_add(w.wrapping_mul(at(start + r * stride + c)))
                    });
                    assert_eq!(*o, want, "{rows} rows, stride {stride}, column {c}");
                }
            }
        }
    }
}
