//! Float dot products of several rows against one vector, four rows per pass: each value of the vector
//! is loaded once for the four rows it meets, and each row's sum is still `0 + w_0 x_0 + w_1 x_1 + ...`,
//! left to right, one rounding for the product and one for the sum (no fused multiply-add).
//!
//! The rows are `f32` ([`dot4_f32`]) or `f16` widened exactly to `f32` on the fly ([`dot4_f16`]). On
//! cores with the DSP instructions and an FPU the four rows run in one assembly loop per dtype
//! (through the kernels' facade, `crate::arch`): `VLDMIA` loads and `VMLA.F32`, which on ARMv7E-M rounds the product and then
//! the sum (it is not fused: the same two roundings as the portable `acc + w * x`), the `f16` rows
//! widened by `VCVTB`/`VCVTT`; two groups of four columns per iteration (one loop test per eight
//! columns): 22.5 instructions per 16 multiply-accumulates for `f32`, 38.5 for `f16`.

/// `out[r] = sum_c rows[r * stride + c] * x[c]` (left to right from 0) for every `r < out.len()`,
/// four rows per pass; `0` for a row that ends beyond `rows`.
pub(crate) fn dot4_f32(rows: &[f32], stride: usize, x: &[f32], out: &mut [f32]) {
    dot4(rows, stride, x, out, quad_f32, 4, |w: &[f32], k| {
        w.get(k).copied().unwrap_or(0.0)
    });
}

/// [`dot4_f32`] of `f16` rows stored two per little-endian word (value `2i` in the low half, `2i + 1`
/// in the high half), each widened exactly to `f32` ([`crate::blob::widen_f16`]); `stride` and the
/// length of `x` in values, both even.
pub(crate) fn dot4_f16(words: &[u32], stride: usize, x: &[f32], out: &mut [f32]) {
    dot4(words, stride / 2, x, out, quad_f16, 2, |w: &[u32], k| {
        let (lo, hi) = w.get(k / 2).map_or((0.0, 0.0), |&w| widen_pair(w));
        if k % 2 == 0 {
            lo
        } else {
            hi
        }
    });
}

/// The portable four-row sums: `four` widens the items of four values.
#[inline(always)]
fn quad_portable<T>(
    block: &[T],
    stride: usize,
    x: &[f32],
    per: usize,
    four: impl Fn(&[T]) -> [f32; 4],
) -> [f32; 4] {
    let mut acc = [0.0f32; 4];
    let rows: [&[T]; 4] = core::array::from_fn(|k| block.get(k * stride..).unwrap_or(&[]));
    let [ca, cb, cc, cd] = rows.map(|r| r.chunks_exact(per));
    for ((((a, b), c), d), x) in ca.zip(cb).zip(cc).zip(cd).zip(x.chunks_exact(4)) {
        let w = [four(a), four(b), four(c), four(d)];
        for k in 0..4 {
            for r in 0..4 {
                acc[r] += w[r][k] * x[k];
            }
        }
    }
    acc
}

/// Four `f32` rows against `x` (whole groups of four values).
#[inline(always)]
fn quad_f32(block: &[f32], stride: usize, x: &[f32]) -> [f32; 4] {
    if let Some(acc) = crate::arch::quad_f32(block, stride, x) {
        return acc;
    }
    quad_portable(block, stride, x, 4, |w| [w[0], w[1], w[2], w[3]])
}

/// Four `f16` rows (two values per word) against `x` (whole groups of four values).
#[inline(always)]
fn quad_f16(block: &[u32], stride: usize, x: &[f32]) -> [f32; 4] {
    if let Some(acc) = crate::arch::quad_f16(block, stride, x) {
        return acc;
    }
    quad_portable(block, stride, x, 2, |w| {
        let (a, b) = widen_pair(w[0]);
        let (c, d) = widen_pair(w[1]);
        [a, b, c, d]
    })
}

/// The two halves of `w` widened to `f32`: (low, high).
#[inline(always)]
fn widen_pair(w: u32) -> (f32, f32) {
    use crate::blob::dtype::widen_f16;
    (widen_f16(w as u16), widen_f16((w >> 16) as u16))
}

/// The four-row loop: `rows` of items `T`, `per` items holding four values; `quad(block, stride, x)`
/// the sums of the four rows `stride` apart from the start of `block` over whole groups of four values
/// (`x.len()` a multiple of 4, every row at least that long);
/// `value(w, k)` is value `k` of the items `w` (for the last `x.len() % 4` columns, and rows one by one).
#[inline(always)]
fn dot4<T: Copy>(
    rows: &[T],
    stride: usize,
    x: &[f32],
    out: &mut [f32],
    quad: impl Fn(&[T], usize, &[f32]) -> [f32; 4],
    per: usize,
    value: impl Fn(&[T], usize) -> f32,
) {
    let items = x.len() * per / 4;
    let row = |r: usize| {
        let start = r.saturating_mul(stride);
        rows.get(start..start.saturating_add(items))
    };
    let tail = x.len() - x.len() % 4;
    let (x4, x_rest) = x.split_at(tail);
    // The quads whose four rows all lie within `rows`: the last one's end is checked once.
    let quads = out.len() / 4;
    let fits = (4 * quads)
        .checked_sub(1)
        .and_then(|last| last.checked_mul(stride)?.checked_add(items))
        .is_some_and(|end| end <= rows.len());
    let whole = if fits { quads } else { 0 };
    let (out4, out_rest) = out.split_at_mut(4 * whole);
    for (q, o) in out4.chunks_exact_mut(4).enumerate() {
        let block = rows.get(4 * q * stride..).unwrap_or(&[]);
        let acc = quad(block, stride, x4);
        if x_rest.is_empty() {
            o.copy_from_slice(&acc);
        } else {
            for (r, o) in o.iter_mut().enumerate() {
                let start = r * stride + tail * per / 4;
                let rest = block.get(start..r * stride + items).unwrap_or(&[]);
                *o = finish(acc[r], rest, x_rest, &value);
            }
        }
    }
    // Rows beyond the whole quads (or all of them, if some row ends early), one by one.
    for (k, o) in out_rest.iter_mut().enumerate() {
        *o = match row(4 * whole + k) {
            Some(w) => finish(0.0, w, x, &value),
            None => 0.0,
        };
    }
}

/// `acc + w_0 x_0 + w_1 x_1 + ...` over `x`, `w_k = value(w, k)`.
#[inline(always)]
fn finish<T>(acc: f32, w: &[T], x: &[f32], value: &impl Fn(&[T], usize) -> f32) -> f32 {
    x.iter()
        .enumerate()
        .fold(acc, |acc, (k, &x)| acc + value(w, k) * x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::widen_f16;
    use crate::testing::lcg;
    use std::vec::Vec;

    fn values(seed: u32, n: usize) -> Vec<f32> {
        let mut next = lcg(seed);
        (0..n)
            .map(|_| (next() >> 8) as f32 / 8_388_608.0 - 1.0)
            .collect()
    }

    /// Row `r`'s sum, left to right from 0, as the one-row path computes it.
    fn plain(w: impl Iterator<Item = f32>, x: &[f32]) -> f32 {
        w.zip(x).fold(0.0, |acc, (w, x)| acc + w * x)
    }

    #[test]
    fn f32_rows_equal_the_row_by_row_sums_bit_for_bit() {
        for (rows, cols, n, stride) in [
            (9, 11, 11, 11),
            (8, 64, 64, 64),
            (5, 16, 16, 64),
            (3, 7, 5, 7),
        ] {
            let w = values(rows as u32 * 7 + cols as u32, rows * stride);
            let x = values(99 + n as u32, n);
            let mut out = std::vec![7.0f32; rows + 2];
            dot4_f32(&w, stride, &x, &mut out);
            for (r, o) in out.iter().enumerate() {
                let want = match w.get(r * stride..r * stride + n) {
                    Some(row) => plain(row.iter().copied(), &x),
                    None => 0.0,
                };
                assert_eq!(o.to_bits(), want.to_bits(), "{rows}x{cols} n {n} row {r}");
            }
        }
    }

    #[test]
    fn f16_rows_equal_the_widened_row_by_row_sums_bit_for_bit() {
        for (rows, cols, n) in [(9, 10, 10), (8, 64, 64), (5, 16, 6), (4, 2, 2)] {
            let halves: Vec<u16> = values(rows as u32 + 3, rows * cols)
                .iter()
                .enumerate()
                .map(|(i, v)| half::f16::from_f32(v * 60.0).to_bits() ^ (i as u16 & 0x8000))
                .collect();
            let words: Vec<u32> = halves
                .chunks_exact(2)
                .map(|h| h[0] as u32 | (h[1] as u32) << 16)
                .collect();
            let x = values(5, n);
            let mut out = std::vec![7.0f32; rows + 1];
            dot4_f16(&words, cols, &x, &mut out);
            for (r, o) in out.iter().enumerate() {
                let want = match halves.get(r * cols..r * cols + n) {
                    Some(row) => plain(row.iter().map(|&h| widen_f16(h)), &x),
                    None => 0.0,
                };
                assert_eq!(o.to_bits(), want.to_bits(), "{rows}x{cols} n {n} row {r}");
            }
        }
    }
}
