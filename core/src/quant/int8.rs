//! The int8 x int8 dot product with integer accumulation: the inner loop of every W8A8 matmul and of the
//! int8 attention scores.
//!
//! Four columns at a time from one little-endian word of each side, split into sign-extended 16-bit
//! lanes and multiply-accumulated pairwise (`crate::arch`: `SXTB16` and `SMLAD` on a Cortex-M4, about
//! 1.5 instructions per multiply-accumulate for four rows at once). Integer sums are exact in any
//! order, so every target computes the same bits.

use super::activations::{Quantized, Wide};
use crate::arch::{mac_lanes, sxtb16, sxtb16_ror8, word};
use crate::blob::{decode_finite_scale as decode_scale, quads, SCALE_UNIT};

/// Columns per `i32` partial sum: `2^16 * 128 * 128 = 2^30`, so no partial sum can overflow whatever the
/// bytes are.
pub const CHUNK: usize = 1 << 16;

/// Columns an `i32` sum of int8 weights times int16 activations holds whatever the values are:
/// `512 * 128 * 32767 < 2^31`.
pub const WIDE_CHUNK: usize = 512;

/// `sum_i w[i] * x[from + i]` of int8 weights (raw blob bytes) and int16 activations ([`Wide`]), over
/// `w`'s length, exact, rounded once to `f32`.
#[inline(never)]
pub fn dot_wide_f32(w: &[u8], x: Wide<'_>, from: usize) -> f32 {
    let term = |(i, &w): (usize, &u8)| (w as i8) as i32 * x.get(from + i);
    if w.len() <= WIDE_CHUNK {
        w.iter().enumerate().fold(0i32, |acc, t| acc + term(t)) as f32
    } else {
        w.iter()
            .enumerate()
            .fold(0i64, |acc, t| acc + term(t) as i64) as f32
    }
}

/// `sum_i w[i] * x[i]`, exact: `i32` partial sums over [`CHUNK`] columns, added in `i64`. `w` holds raw
/// blob bytes (two's-complement int8). Extra elements of the longer slice are ignored.
#[inline]
pub fn dot(w: &[u8], x: &[i8]) -> i64 {
    chunked(w, bytemuck::cast_slice(x))
}

/// `sum_i W[c0 + i] x(i)` over `i < n` (and the row's columns) of a row of an `I8` matrix in quads
/// (`place`, of `cols` columns; its words 16 bytes apart in a quad), exact in `i64`: a word at a time
/// from a group's start (`i32` per word), else a byte at a time. `x(i)` an int8 or int16 value.
#[inline]
pub fn dot_place(
    w: &[u8],
    (place, cols): (quads::RowPlace, usize),
    c0: usize,
    n: usize,
    x: impl Fn(usize) -> i32,
) -> i64 {
    let n = n.min(cols.saturating_sub(c0));
    let words = match c0 % 4 {
        0 => (n / 4).min((cols / 4).saturating_sub(c0 / 4)),
        _ => 0,
    };
    let start = place.start.wrapping_add(c0 / 4 * place.step);
    let word_sum = |g: usize| -> i64 {
        let at = start.wrapping_add(g * place.step);
        let bytes = w.get(at..at.wrapping_add(4)).unwrap_or(&[]);
        let term = |(j, &b): (usize, &u8)| (b as i8) as i32 * x(4 * g + j);
        bytes.iter().enumerate().map(term).sum::<i32>() as i64
    };
    let byte = |i: usize| {
        w.get(place.at(cols, c0 + i))
            .map_or(0, |&b| (b as i8) as i64)
    };
    let body = (0..words).map(word_sum).sum::<i64>();
    (4 * words..n).fold(body, |acc, i| acc + byte(i) * x(i) as i64)
}

/// `sum_i W[i]` over the first `n` columns of a row of an `I8` matrix in quads (`place`, of `cols`
/// columns), exact: [`dot_place`] against ones, a word at a time with its bytes (offset by 128 to
/// unsigned) gathered in two 16-bit lanes, up to 128 words per batch (a lane then stays below 2^16).
pub fn sum_place(w: &[u8], (place, cols): (quads::RowPlace, usize), n: usize) -> i64 {
    let n = n.min(cols);
    let words = n / 4;
    let byte = |i: usize| w.get(place.at(cols, i)).map_or(0, |&b| (b as i8) as i64);
    let span = words
        .saturating_sub(1)
        .saturating_mul(place.step)
        .saturating_add(4);
    let body = match words {
        0 => Some(&[][..]),
        _ => w.get(place.start..).and_then(|b| b.get(..span)),
    };
    let Some(body) = body else {
        // A row past the data (no blob has one): its bytes one at a time, the missing ones zeros.
        return (0..n).fold(0, |acc, i| acc + byte(i));
    };
    let mut row = body.chunks(place.step.max(1));
    let (mut total, mut left) = (0i64, words);
    while left > 0 {
        let batch = left.min(128);
        let mut lanes = 0u32;
        for c in row.by_ref().take(batch) {
            let v = c.get(..4).map_or(0, word) ^ 0x8080_8080;
            lanes += (v & 0x00ff_00ff) + ((v >> 8) & 0x00ff_00ff);
        }
        total += i64::from((lanes & 0xffff) + (lanes >> 16)) - 512 * batch as i64;
        left -= batch;
    }
    (4 * words..n).fold(total, |acc, i| acc + byte(i))
}

/// The exact sums of the whole words of a quad's four rows (`quad`: `cols / 4` groups of 16 bytes,
/// the rows' words in turn): [`sum_place`]'s word loop for the four rows at once.
pub fn quad_word_sums(quad: &[u8], cols: usize) -> [i64; 4] {
    let body = quad.get(..16 * (cols / 4)).unwrap_or(&[]);
    let mut sums = [0i64; 4];
    for batch in body.chunks(16 * 128) {
        let mut lanes = [0u32; 4];
        for g in batch.chunks_exact(16) {
            for (l, w) in lanes.iter_mut().zip(g.chunks_exact(4)) {
                let v = word(w) ^ 0x8080_8080;
                *l += (v & 0x00ff_00ff) + ((v >> 8) & 0x00ff_00ff);
            }
        }
        let words = (batch.len() / 16) as i64;
        for (s, l) in sums.iter_mut().zip(lanes) {
            *s += i64::from((l & 0xffff) + (l >> 16)) - 512 * words;
        }
    }
    sums
}

/// `sum_i a[i] * b[i]` of two int8 vectors (the attention score `q . k`), exact as [`dot`].
#[cfg(test)]
fn dot_i8(a: &[i8], b: &[i8]) -> i64 {
    chunked(bytemuck::cast_slice(a), bytemuck::cast_slice(b))
}

/// [`dot_i32`] over matching chunks of at most [`CHUNK`] elements, summed in `i64`.
fn chunked(a: &[u8], b: &[u8]) -> i64 {
    a.chunks(CHUNK)
        .zip(b.chunks(CHUNK))
        .fold(0i64, |acc, (a, b)| acc + dot_i32(a, b) as i64)
}

/// [`chunked`] rounded once to `f32`; without a chunk's overflow, straight from [`dot_i32`]'s `i32`
/// (the same value, without the `i64` conversion's library call).
#[inline]
fn dot_f32(a: &[u8], b: &[u8]) -> f32 {
    if a.len().min(b.len()) <= CHUNK {
        dot_i32(a, b) as f32
    } else {
        dot_f32_long(a, b)
    }
}

/// [`chunked`] as `f32`, for vectors longer than a chunk (out of line: one copy for every caller).
#[inline(never)]
fn dot_f32_long(a: &[u8], b: &[u8]) -> f32 {
    chunked(a, b) as f32
}

/// `acc + sum_k w_k x_k` over the four signed bytes of the words `w` and `x`.
#[inline(always)]
fn mac4(acc: i32, w: u32, x: u32) -> i32 {
    mac_lanes(acc, w, (sxtb16(x), sxtb16_ror8(x)))
}

/// `sum_i w[i] * x[i]` of bytes read as int8, in `i32`, over the shorter length (at most [`CHUNK`]).
/// Out of line: the one copy of the single-row int8 dot product in a build, which every caller shares.
#[inline(never)]
fn dot_i32(w: &[u8], x: &[u8]) -> i32 {
    let n = w.len().min(x.len());
    let (w, x) = (&w[..n], &x[..n]);
    let (w4, x4) = (w.chunks_exact(4), x.chunks_exact(4));
    let tail = tail(w4.remainder(), x4.remainder());
    w4.zip(x4)
        .fold(tail, |acc, (w, x)| mac4(acc, word(w), word(x)))
}

/// The last `n % 4` columns, one at a time.
#[inline(always)]
fn tail(w: &[u8], x: &[u8]) -> i32 {
    w.iter()
        .zip(x)
        .fold(0, |acc, (&w, &x)| acc + (w as i8) as i32 * (x as i8) as i32)
}

/// `out[r] = (W[r] . x) * (s_w[r] * s_x)` for an int8 matrix `w` of `cols` columns in the blob's
/// layout (its rows in quads, [`crate::blob::quads`]; `w.len() / cols` rows) with `f16` row scales
/// `scales` (as [`rescale`]), over the first `x.len()` columns of each row: a quad at a time on
/// [`super::dot4::dot4_quads`] when `lanes` are `x`'s ([`Quantized::lanes`](super::Quantized::lanes)),
/// else (and for the last `rows % 4`) one row at a time.
/// A row or scale missing from `w` or `scales` leaves its output alone. `x` is int8 ([`Quantized::q`])
/// or int16 ([`Quantized::wide`], on the same kernel for up to [`WIDE_CHUNK`] columns).
///
/// `bias` (little-endian `f32`s, any alignment, possibly empty) is then added to the outputs it
/// covers, `out[r] += b[r]`: in the rescaling loop itself for the four-row part (the same two
/// roundings, product then sum, as a separate pass; with the DSP instructions and an FPU the kernel's
/// own epilogue rescales and adds), after it for the rest.
pub fn matvec(
    w: &[u8],
    cols: usize,
    scales: &[u8],
    x: &Quantized<'_>,
    bias: &[u8],
    out: &mut [f32],
) {
    // An int8-only build (no `activations-i16`) keeps no int16 branch.
    let wide = match crate::blob::Activations::I16.compiled() {
        true => x.wide,
        false => Wide(&[]),
    };
    let (lanes, s_x) = (x.lanes, x.scale);
    let n = x.q.len().max(wide.len());
    let xb: &[u8] = bytemuck::cast_slice(x.q);
    let (mut done, mut fused) = (0, 0);
    // `s_w * s_x` as `scale_bits(s_w) * (s_x * 2^112)`, the same bits while that stays finite.
    let chunk = if wide.is_empty() { CHUNK } else { WIDE_CHUNK };
    let fits = cols != 0 && n <= cols.min(chunk);
    if fits && n % 4 == 0 && lanes.len() == n / 2 && s_x < 65_536.0 {
        let rows = out.len().min(w.len() / cols).min(scales.len() / 2);
        let quads = &mut out[..rows - rows % 4];
        if let Some(biased) = quads_rescaled(w, cols, lanes, quads, scales, s_x, bias) {
            (done, fused) = (quads.len(), biased);
        }
    }
    // Every row done and no bias word left for the rows after `fused`: nothing more to do.
    if done == out.len() && (fused == done || bias.len() / 4 <= fused) {
        return;
    }
    // The other rows one at a time (all of them without the lanes), as [`rescale`] of [`dot`].
    let (rows, n) = (w.len() / cols.max(1), if n <= cols { n } else { 0 });
    let rest = out.iter_mut().zip(scales.chunks_exact(2)).take(rows);
    for (r, (o, s)) in rest.enumerate().skip(done) {
        let place = quads::row_place(rows, cols, r);
        let row = place.contiguous(cols).and_then(|at| w.get(at..at + n));
        let acc = match (row, wide.is_empty()) {
            (Some(row), true) => dot_f32(row, xb),
            (Some(row), false) => dot_wide_f32(row, wide, 0),
            (None, _) => quad_row(w, [rows, cols, r, n], xb, wide),
        };
        *o = acc * (decode_scale(s) * s_x);
    }
    let rest = bias.get(4 * fused..).unwrap_or(&[]);
    for (o, b) in out.iter_mut().skip(fused).zip(rest.chunks_exact(4)) {
        *o += f32::from_bits(word(b));
    }
}

/// [`matvec`]'s row `r` of `n` columns (of `[rows, cols]`) when it lies in a quad, its words 16
/// bytes apart (no lanes to run the kernel on, or an unaligned blob): its bytes one at a time, the
/// same exact sum, against the int8 `xb` or else the int16 `wide`. Out of line: rare.
#[cold]
#[inline(never)]
fn quad_row(w: &[u8], [rows, cols, r, n]: [usize; 4], xb: &[u8], wide: Wide<'_>) -> f32 {
    let place = (quads::row_place(rows, cols, r), cols);
    let acc = match wide.is_empty() {
        true => dot_place(w, place, 0, n, |i| {
            xb.get(i).map_or(0, |&x| (x as i8) as i32)
        }),
        false => dot_place(w, place, 0, n, |i| wide.get(i)),
    };
    acc as f32
}

/// [`matvec`]'s four-row part: the kernel's sums of the quads of rows of `quads` times `s_w * s_x`, plus the bias over
/// the rows it covers ([`rescale_quads`]); with the DSP instructions in the kernel's own epilogue
/// (`crate::arch::dot4_rescaled`, the same roundings). Returns how many rows took the bias, or `None` (nothing
/// written: the caller computes them one at a time).
#[inline(always)]
fn quads_rescaled(
    w: &[u8],
    cols: usize,
    lanes: &[u32],
    quads: &mut [f32],
    scales: &[u8],
    s_x: f32,
    bias: &[u8],
) -> Option<usize> {
    if crate::arch::RESCALES_QUADS {
        return crate::arch::dot4_rescaled(w, cols, lanes, quads, scales, s_x, bias);
    }
    super::dot4::dot4_quads(w, cols, lanes, bytemuck::cast_slice_mut(quads));
    Some(rescale_quads(quads, scales, s_x, bias))
}

/// [`matvec`]'s epilogue for the four-row part: the kernel's `i32` sums (as bits in `quads`) times
/// `s_w * s_x` (`s_w` from the `f16` scales, two per word), plus the bias over the pairs of rows it
/// covers; returns how many rows took the bias. Out of line, so that its registers do not widen the
/// frame that is live while the kernel runs (the Cortex-M0's deepest stack goes through here).
#[inline(never)]
fn rescale_quads(quads: &mut [f32], scales: &[u8], s_x: f32, bias: &[u8]) -> usize {
    let s_x = s_x * SCALE_UNIT;
    // Pairs of rows with their two scales in one word: with the bias where it covers the pair.
    let biased = quads.len().min(bias.len() / 4) / 2 * 2;
    let (with, without) = quads.split_at_mut(biased);
    let (scales_with, scales_without) = scales.split_at(biased.min(scales.len() / 2) * 2);
    let pairs = with.chunks_exact_mut(2).zip(scales_with.chunks_exact(4));
    for ((o, s), b) in pairs.zip(bias.chunks_exact(8)) {
        let (s, b) = (
            crate::blob::scale_bits_pair(s),
            [&b[..4], &b[4..]].map(word),
        );
        for ((o, s), b) in o.iter_mut().zip(s).zip(b) {
            *o = o.to_bits() as i32 as f32 * (s * s_x) + f32::from_bits(b);
        }
    }
    let pairs = without
        .chunks_exact_mut(2)
        .zip(scales_without.chunks_exact(4));
    for (o, s) in pairs {
        for (o, s) in o.iter_mut().zip(crate::blob::scale_bits_pair(s)) {
            *o = o.to_bits() as i32 as f32 * (s * s_x);
        }
    }
    biased
}

/// `a . b` of two int8 vectors, exact, rounded once to `f32` (as [`dot_i8`]`as f32`).
#[inline]
pub fn dot_i8_f32(a: &[i8], b: &[i8]) -> f32 {
    dot_f32(bytemuck::cast_slice(a), bytemuck::cast_slice(b))
}

/// Rescales an integer dot product: `acc * (s_w * s_x)`, in that order. `acc` rounded to `f32` from
/// `i32` where it fits one (one instruction on a core with an FPU, where `i64` needs a library call):
/// the same value.
#[inline]
pub fn rescale(acc: i64, s_w: f32, s_x: f32) -> f32 {
    let acc = i32::try_from(acc).map_or(acc as f32, |a| a as f32);
    acc * (s_w * s_x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::activations::{Quantized, Wide};
    use crate::quant::dot4;

    #[test]
    fn rescale_rounds_an_i64_as_its_i32() {
        let edges = [
            0i64,
            1,
            -1,
            (1 << 24) + 1,
            -(1 << 24) - 3,
            i32::MAX as i64,
            i32::MIN as i64,
        ];
        let beyond = [
            i32::MAX as i64 + 1,
            i32::MIN as i64 - 1,
            i64::MAX,
            i64::MIN,
            1 << 40,
        ];
        for acc in edges.into_iter().chain(beyond) {
            for (s_w, s_x) in [(0.75f32, 3.0e-3f32), (1.0, 1.0)] {
                let want = acc as f32 * (s_w * s_x);
                assert_eq!(rescale(acc, s_w, s_x).to_bits(), want.to_bits(), "{acc}");
            }
        }
    }

    #[test]
    fn dot_is_exact_and_sign_extends_bytes() {
        let w = [0x80u8, 0x7f, 0xff, 0x01];
        let x = [1i8, 2, 3, -4];
        assert_eq!(dot(&w, &x), -128 + 254 - 3 - 4);
        assert_eq!(dot_i8(&[-128, 127], &[-128, 127]), 16384 + 16129);
    }

    #[test]
    fn words_and_tails_equal_the_plain_sum() {
        let w: std::vec::Vec<u8> = (0..77u32).map(|i| (i * 97 + 13) as u8).collect();
        let x: std::vec::Vec<i8> = (0..77i32).map(|i| (i * 53 % 255 - 127) as i8).collect();
        for n in [0, 1, 3, 4, 5, 8, 63, 64, 77] {
            let want: i64 = (0..n).map(|i| (w[i] as i8) as i64 * x[i] as i64).sum();
            assert_eq!(dot(&w[..n], &x[..n]), want, "n {n}");
            let xb: &[u8] = bytemuck::cast_slice(&x[..n - n % 4]);
            let lanes: std::vec::Vec<u32> = xb
                .chunks_exact(4)
                .flat_map(|q| [sxtb16(word(q)), sxtb16_ror8(word(q))])
                .collect();
            for stride in [0, 1, 3, (77 - n) / 7] {
                let rows = (0..8).take_while(|r| r * stride + xb.len() <= 77).count() / 4 * 4;
                let mut sums = [5i32; 9];
                dot4::dot4_strided(&w, stride, &lanes, &mut sums[..rows + 1]);
                for (r, sum) in sums.into_iter().enumerate() {
                    let want: i64 = match r < rows {
                        true => (0..xb.len())
                            .map(|i| (w[r * stride + i] as i8) as i64 * (xb[i] as i8) as i64)
                            .sum(),
                        false => 5,
                    };
                    assert_eq!(sum as i64, want, "n {n} stride {stride} row {r}");
                }
            }
        }
    }

    #[test]
    fn matvec_equals_row_by_row() {
        let cols = 11;
        let x: std::vec::Vec<i8> = (0..cols as i32).map(|i| (i * 41 - 100) as i8).collect();
        for rows in 1..10 {
            let w: std::vec::Vec<u8> = (0..rows * cols).map(|i| (i * 31 + 7) as u8).collect();
            let blob = quads::from_row_major(rows, cols, &w);
            let scales: std::vec::Vec<u8> = (0..rows)
                .flat_map(|r| crate::blob::encode_scale(0.5 + r as f32).unwrap())
                .collect();
            for n in [cols, 8, 4] {
                let xb: &[u8] = bytemuck::cast_slice(&x[..n]);
                let lanes: std::vec::Vec<u32> = xb
                    .chunks_exact(4)
                    .flat_map(|q| [sxtb16(word(q)), sxtb16_ror8(word(q))])
                    .collect();
                // Biases over none, some (an odd number: a pair split) and all of the rows, with
                // a negative zero and a value the product can cancel.
                let bias: std::vec::Vec<u8> = (0..rows)
                    .map(|r| [-0.0, 0.3 - r as f32, 1e-3, -2.5e4][r % 4])
                    .flat_map(f32::to_le_bytes)
                    .collect();
                for (lanes, b) in [&lanes[..], &[]].into_iter().flat_map(|l| {
                    [0, 3, rows, rows / 2 * 2 + 1].map(|k| (l, &bias[..4 * k.min(rows)]))
                }) {
                    let mut out = [7.0f32; 10];
                    for s_x in [0.25, 1e-41, 7e4] {
                        let q = Quantized {
                            q: &x[..n],
                            wide: Wide(&[]),
                            scale: s_x,
                            lanes,
                        };
                        matvec(&blob, cols, &scales, &q, b, &mut out[..rows]);
                        for r in 0..rows {
                            let row = &w[r * cols..r * cols + n];
                            let mut want = rescale(dot(row, &x[..n]), 0.5 + r as f32, s_x);
                            if let Some(b) = b.get(4 * r..4 * r + 4) {
                                // The separate pass the fused one replaces.
                                want += f32::from_le_bytes(b.try_into().unwrap());
                            }
                            assert_eq!(out[r].to_bits(), want.to_bits(), "rows {rows} n {n} r {r}");
                        }
                        assert_eq!(out[rows], 7.0);
                    }
                }
            }
        }
    }

    #[test]
    fn int16_inputs_equal_the_exact_row_sums_on_the_kernel_and_off_it() {
        use crate::quant::activations::quantize16;
        for (rows, cols) in [(9, 12), (8, 64), (5, 7), (4, 520), (3, 1)] {
            let w: std::vec::Vec<u8> = (0..rows * cols).map(|i| (i * 89 + 5) as u8).collect();
            let blob = quads::from_row_major(rows, cols, &w);
            let scales: std::vec::Vec<u8> = (0..rows)
                .flat_map(|r| crate::blob::encode_scale(0.125 + r as f32).unwrap())
                .collect();
            // Extremes of both ranges: the kernel's sums must not overflow.
            let x: std::vec::Vec<f32> = (0..cols)
                .map(|i| {
                    if i % 5 == 0 {
                        -3.0
                    } else {
                        (i as f32 * 0.37).sin()
                    }
                })
                .collect();
            let mut buf = std::vec![0u32; cols];
            let q = quantize16(&x, bytemuck::cast_slice_mut(&mut buf));
            assert_eq!(q.lanes.len(), if cols % 4 == 0 { cols / 2 } else { 0 });
            let mut out = std::vec![7.0f32; rows + 1];
            matvec(&blob, cols, &scales, &q, &[], &mut out[..rows]);
            for r in 0..rows {
                let exact: i64 = (0..cols)
                    .map(|c| (w[r * cols + c] as i8) as i64 * q.wide.get(c) as i64)
                    .sum();
                let want = rescale(exact, 0.125 + r as f32, q.scale);
                assert_eq!(out[r].to_bits(), want.to_bits(), "{rows}x{cols} row {r}");
            }
            assert_eq!(out[rows], 7.0);
        }
    }

    #[test]
    fn chunks_never_overflow() {
        let n = 3 * CHUNK + 5;
        let w = std::vec![0x80u8; n];
        let x = std::vec![-128i8; n];
        assert_eq!(dot(&w, &x), 16384 * n as i64);
    }
}
