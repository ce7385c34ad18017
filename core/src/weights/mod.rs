//! Read-only views of tensors inside a blob, dequantised on the fly; no copies, any alignment. On the
//! host (feature `std`) also their column-blocked `f32` copies (`blocked.rs`, one matrix; `host.rs`,
//! `host::HostWeights`, a blob's), which a matrix computes its rows from when a
//! model has them attached.

#[cfg(feature = "std")]
pub(crate) mod blocked;
#[cfg(feature = "std")]
pub(crate) mod host;

use crate::blob::quads::{row_bytes, row_parts, row_place};
use crate::blob::{
    decode_finite_scale, scales_valid, widen_f16, DType, I4_GROUP, I8_GROUP, SCALE_BYTES,
};
use crate::math::rows as row_block;
use crate::quant::activations::Wide;
use crate::quant::{groups, int4, int8};
#[cfg(feature = "std")]
use blocked::Blocked;

/// An `f32` vector (biases, norm weights).
#[derive(Clone, Copy, Debug)]
pub struct Vector<'a> {
    data: &'a [u8],
}

/// Reads little-endian `f32`s from bytes of any alignment.
pub(crate) fn f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Reads little-endian `f16`s from bytes of any alignment, widened to `f32`.
fn f16s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(2)
        .map(|b| widen_f16(u16::from_le_bytes([b[0], b[1]])))
}

/// `x . w` for the weights `w`, accumulated left to right in `f32`.
#[inline(always)]
fn fold_dot(w: impl Iterator<Item = f32>, x: &[f32]) -> f32 {
    w.zip(x).fold(0.0, |acc, (w, x)| acc + w * x)
}

/// Elements `start .. start + n` of `data` holding `size`-byte elements (`None` if out of range).
#[inline(always)]
fn elements(data: &[u8], size: usize, start: usize, n: usize) -> Option<&[u8]> {
    data.get(size * start..size * (start + n))
}

/// `W[start ..] . x` of an `f32` matrix's bytes (0 if out of range).
fn dot_f32(data: &[u8], start: usize, x: &[f32]) -> f32 {
    elements(data, 4, start, x.len()).map_or(0.0, |w| fold_dot(f32s(w), x))
}

/// `W[start ..] . x` of an `f16` matrix's bytes (0 if out of range).
fn dot_f16(data: &[u8], start: usize, x: &[f32]) -> f32 {
    elements(data, 2, start, x.len()).map_or(0.0, |w| fold_dot(f16s(w), x))
}

impl<'a> Vector<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Vector { data }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len() / 4
    }
    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// The elements' bytes: little-endian `f32`s, any alignment.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.data
    }
    /// The elements.
    pub fn iter(&self) -> impl Iterator<Item = f32> + 'a {
        f32s(self.data)
    }
    /// `out[i] += self[i]` as far as both go: through `math::add` (four values per pass)
    /// where the bytes are word-aligned little-endian `f32`s (every aligned blob's on a little-endian
    /// target), else one value at a time; the same sums either way.
    pub fn add_to(&self, out: &mut [f32]) {
        match bytemuck::try_cast_slice::<u8, f32>(self.data) {
            Ok(b) if cfg!(target_endian = "little") => crate::math::add(out, b),
            _ => out.iter_mut().zip(self.iter()).for_each(|(o, b)| *o += b),
        }
    }
}

/// A `[rows, cols]` matrix in any [`DType`]: `rows` outputs, each a dot product over `cols` inputs.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    dtype: DType,
    rows: usize,
    cols: usize,
    data: &'a [u8],
    /// The scales, then (an `I8` matrix's, if the blob stores them) its row sums,
    /// [`crate::blob::ROW_SUM_BYTES`] per row.
    scales: &'a [u8],
    /// The host's column-blocked copy (`blocked.rs`), if the model has one attached.
    #[cfg(feature = "std")]
    blocked: Option<&'a Blocked>,
}

/// `out[r] = f(r)` for every row `r`.
#[inline(always)]
fn each(out: &mut [f32], f: impl Fn(usize) -> f32) {
    out.iter_mut().enumerate().for_each(|(r, o)| *o = f(r));
}

/// Scale `i` of `scales`, exact (0 if out of range). A matrix comes from `Model::from_bytes` or
/// [`Matrix::from_parts`], which accept only finite positive scales: decoded without `f16`'s non-finite and subnormal cases
/// ([`decode_finite_scale`], the same value for every scale it accepts).
fn scale_at(scales: &[u8], i: usize) -> f32 {
    let at = i.saturating_mul(SCALE_BYTES);
    decode_finite_scale(scales.get(at..).unwrap_or(&[]))
}

impl<'a> Matrix<'a> {
    /// A matrix over a blob's bytes: `scales` its scales, then optionally (an `I8` matrix's) its row
    /// sums, kept where they are exactly one per row.
    pub(crate) fn new(
        dtype: DType,
        rows: usize,
        cols: usize,
        data: &'a [u8],
        scales: &'a [u8],
    ) -> Self {
        Matrix {
            dtype,
            rows,
            cols,
            data,
            scales,
            #[cfg(feature = "std")]
            blocked: None,
        }
    }
    /// This matrix computing its whole blocks of rows from the host's blocked copy `b` of it.
    #[cfg(feature = "std")]
    pub(crate) fn with_blocked(self, blocked: Option<&'a Blocked>) -> Self {
        Matrix { blocked, ..self }
    }
    /// A matrix over encoded `data` and stored (`f16`) `scales`, checked like a blob's tensors:
    /// byte lengths must match `dtype` and `[rows, cols]`, and every scale be finite and positive.
    /// `data` is in the blob's layout: an `I8` matrix in quads of rows ([`crate::blob::quads`],
    /// `quads::from_row_major` of row-major bytes), the other dtypes row-major.
    pub fn from_parts(
        dtype: DType,
        rows: usize,
        cols: usize,
        data: &'a [u8],
        scales: &'a [u8],
    ) -> Option<Self> {
        let ok = dtype.compiled()
            && dtype.data_len(rows, cols) == Some(data.len())
            && dtype
                .n_scales(rows, cols)
                .and_then(|n| n.checked_mul(SCALE_BYTES))
                == Some(scales.len())
            && scales_valid(scales);
        ok.then(|| Matrix::new(dtype, rows, cols, data, scales))
    }
    /// Storage type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Number of rows (outputs).
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of columns (inputs).
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Raw encoded values as the blob stores them (for integer kernels and size reports): row-major,
    /// but an `I8` matrix in quads of rows ([`crate::blob::quads`]); [`Matrix::from_parts`] takes the
    /// same layout.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }
    /// The stored `f16` scales, little-endian (empty for `f32` and `f16`).
    pub fn scales(&self) -> &'a [u8] {
        // An `I8` matrix's scales are its first `rows` (its row sums, if stored, follow).
        match self.dtype {
            DType::I8 => {
                let n = self.rows.saturating_mul(SCALE_BYTES);
                self.scales.get(..n).unwrap_or(self.scales)
            }
            _ => self.scales,
        }
    }
    /// The scale bytes from the first on, as the blob holds them (an `I8` matrix's row sums may
    /// follow its `rows` scales): what the kernels read, scale `i` at `2 i`, without trimming.
    #[inline(always)]
    pub(crate) fn scale_bytes(&self) -> &'a [u8] {
        self.scales
    }
    /// The row sums stored after an `I8` matrix's scales (exactly one per row), if there are.
    #[inline(always)]
    fn row_sums(&self) -> Option<&'a [u8]> {
        let at = self.rows.saturating_mul(SCALE_BYTES);
        let len = self.dtype.row_sums_len(self.rows)?;
        let sums = self.scales.get(at..)?;
        (len > 0 && sums.len() == len).then_some(sums)
    }
    /// Scale `i` (row `i` for `i8`; row `i / groups`, group `i % groups` for `i4` and `i8g`).
    pub fn scale(&self, i: usize) -> f32 {
        scale_at(self.scales, i)
    }

    /// `W[r][c0 .. c0 + x.len()] . x`, accumulated left to right in `f32`.
    pub fn dot(&self, r: usize, c0: usize, x: &[f32]) -> f32 {
        let start = r * self.cols + c0;
        match self.dtype {
            d @ DType::F32 if d.compiled() => dot_f32(self.data, start, x),
            d @ DType::F16 if d.compiled() => dot_f16(self.data, start, x),
            d @ DType::I8 if d.compiled() => self.dot_i8(r, c0, x),
            d @ (DType::I4 | DType::I8G) if d.compiled() => self.dot_groups(r, c0, x),
            _ => 0.0,
        }
    }

    /// `out[r] = W[r][c0 .. c0 + x.len()] . x` for every row, as [`Matrix::dot`] (the same bits): on
    /// the host (`std`), aligned little-endian `f32` rows four per pass (`row_block::dot4_f32`).
    pub fn dot_columns(&self, c0: usize, x: &[f32], out: &mut [f32]) {
        let n = self.rows.min(out.len());
        let out = &mut out[..n];
        #[cfg(feature = "std")]
        if let (t @ DType::F32, true, true) = (
            self.dtype,
            cfg!(target_endian = "little"),
            c0.saturating_add(x.len()) <= self.cols,
        ) {
            let rows = bytemuck::try_cast_slice::<u8, f32>(self.data).ok();
            if let (true, Some(w)) = (t.compiled(), rows.and_then(|w| w.get(c0..))) {
                row_block::dot4_f32(w, self.cols, x, out);
                return;
            }
        }
        for (r, o) in out.iter_mut().enumerate() {
            *o = self.dot(r, c0, x);
        }
    }

    /// `out[r] = W[r] . x` for every row, as [`Matrix::dot`] with the dtype dispatched once.
    pub fn matvec(&self, x: &[f32], out: &mut [f32]) {
        let n = self.rows.min(out.len());
        let out = &mut out[..n];
        // On the host, the whole blocks of rows from its blocked copy (the same bits), the rest (fewer
        // than a block) one row at a time as `Matrix::dot`.
        #[cfg(feature = "std")]
        if let Some(done) = self.blocked.map(|b| b.matvec(x, out)).filter(|&d| d > 0) {
            for (r, o) in out.iter_mut().enumerate().skip(done) {
                *o = self.dot(r, 0, x);
            }
            return;
        }
        let c = self.cols;
        let d = self.data;
        // Aligned float rows (every tensor of a blob at an aligned address): four rows per pass.
        let (f32_rows, f16_rows) = (
            bytemuck::try_cast_slice::<u8, f32>(d),
            bytemuck::try_cast_slice::<u8, u32>(d).ok(),
        );
        // The blob is little-endian: the values are read in place on little-endian targets only.
        let le = cfg!(target_endian = "little");
        let f32_rows = f32_rows.ok().filter(|_| le);
        let f16_rows = f16_rows.filter(|_| le && c % 2 == 0 && x.len() % 2 == 0);
        match self.dtype {
            t @ DType::F32 if t.compiled() => match f32_rows {
                Some(w) => row_block::dot4_f32(w, c, x, out),
                None => each(out, |r| dot_f32(d, r * c, x)),
            },
            t @ DType::F16 if t.compiled() => match f16_rows {
                Some(w) => row_block::dot4_f16(w, c, x, out),
                None => each(out, |r| dot_f16(d, r * c, x)),
            },
            t @ DType::I8 if t.compiled() => each(out, |r| self.dot_i8(r, 0, x)),
            t @ (DType::I4 | DType::I8G) if t.compiled() => each(out, |r| self.dot_groups(r, 0, x)),
            _ => out.fill(0.0),
        }
    }

    /// `outs[p * out_width ..][.. rows] = W xs[p * cols ..][.. cols]` for `n` inputs `p`: each output
    /// exactly [`Matrix::matvec`]'s. On the host with a blocked copy, one load of a block's weights
    /// serves several inputs (`host/blocked.rs`); otherwise input by input.
    #[cfg(feature = "std")]
    pub(crate) fn matmul(&self, xs: &[f32], n: usize, outs: &mut [f32], out_width: usize) {
        let done = self.blocked.map_or(0, |b| b.matmul(xs, n, outs, out_width));
        let (in_width, rows) = (self.cols, self.rows.min(out_width));
        for (x, out) in xs
            .chunks_exact(in_width.max(1))
            .zip(outs.chunks_mut(out_width))
            .take(n)
        {
            let out = out.get_mut(..rows).unwrap_or(&mut []);
            match done {
                0 => self.matvec(x, out),
                _ => {
                    for (r, o) in out.iter_mut().enumerate().skip(done) {
                        *o = self.dot(r, 0, x);
                    }
                }
            }
        }
    }

    /// Row `r` of an `i8` matrix from column `c0`, at most `n` bytes ([`row_bytes`]).
    #[inline(always)]
    fn i8_row(&self, r: usize, c0: usize, n: usize) -> impl Iterator<Item = u8> + 'a {
        row_bytes(self.data, self.rows, self.cols, r, c0, n)
    }

    /// Bytes `c0 .. c0 + n` of row `r` of an `i8` matrix as one slice, when they lie contiguous
    /// (a row of the row-major rest): `Some(empty)` if out of range; `None` in a quad.
    #[inline(always)]
    fn i8_slice(&self, r: usize, c0: usize, n: usize) -> Option<&'a [u8]> {
        let start = row_place(self.rows, self.cols, r)
            .contiguous(self.cols)?
            .saturating_add(c0);
        Some(self.data.get(start..start.saturating_add(n)).unwrap_or(&[]))
    }

    /// `(W[r][c0 ..] . x) * s_w[r]` of an `i8` matrix against `f32` inputs.
    fn dot_i8(&self, r: usize, c0: usize, x: &[f32]) -> f32 {
        let w = self.i8_row(r, c0, x.len()).map(|q| (q as i8) as f32);
        fold_dot(w, x) * self.scale(r)
    }

    /// Row `r` of an `i4` (packed) or `i8g` matrix (empty if out of range).
    fn group_row(&self, r: usize) -> &'a [u8] {
        let row_bytes = self.dtype.row_bytes(self.cols).unwrap_or(0);
        self.data
            .get(r * row_bytes..(r + 1) * row_bytes)
            .unwrap_or(&[])
    }

    /// Weight `c` of row `row` of a grouped matrix, an integer (0 past the row).
    #[inline(always)]
    fn group_weight(&self, row: &[u8], c: usize) -> i32 {
        match self.dtype {
            DType::I4 => int4::nibble(row, c),
            _ => row.get(c).map_or(0, |&q| (q as i8) as i32),
        }
    }

    /// The scale of group `g` of row `r` of a grouped matrix.
    fn group_scale(&self, r: usize, g: usize) -> f32 {
        self.scale(r * self.dtype.groups(self.cols) + g)
    }

    /// `W[r][c0 ..] . x` of an `i4` or `i8g` matrix against `f32` inputs, each group summed in `f32`
    /// then scaled ([`groups::sum_f32`]).
    fn dot_groups(&self, r: usize, c0: usize, x: &[f32]) -> f32 {
        let row = self.group_row(r);
        let w = |c| self.group_weight(row, c) as f32;
        groups::sum_f32(c0, x, self.dtype.group(self.cols), w, |g| {
            self.group_scale(r, g)
        })
    }

    /// `W[r][c0 .. c0 + x.len()] . x` for int8 activations `x` of scale `s_x` (`x ~ q * s_x`): integer
    /// accumulation, then `acc * (s_w[r] * s_x)` for `i8`, `(sum_g acc_g * s_w[r][g]) * s_x` for `i4`.
    /// Float matrices meet the dequantised `x` in `f32`.
    pub fn dot_q(&self, r: usize, c0: usize, x: &[i8], s_x: f32) -> f32 {
        match self.dtype {
            d @ DType::I8 if d.compiled() => {
                let acc = match self.i8_slice(r, c0, x.len()) {
                    Some(w) => int8::dot(w, x),
                    None => {
                        let place = (row_place(self.rows, self.cols, r), self.cols);
                        int8::dot_place(self.data, place, c0, x.len(), |i| x[i] as i32)
                    }
                };
                int8::rescale(acc, self.scale(r), s_x)
            }
            d @ DType::I4 if d.compiled() => {
                int4::dot(self.group_row(r), c0, x, |g| self.group_scale(r, g)) * s_x
            }
            d @ DType::I8G if d.compiled() => {
                let row = self.group_row(r);
                let piece = |a: usize, b: usize| {
                    let (w, x) = (row.get(a..b), x.get(a - c0..b - c0));
                    w.zip(x).map_or(0, |(w, x)| int8::dot(w, x) as i32)
                };
                let scale = |g| self.group_scale(r, g);
                groups::sum(c0, x.len(), I8_GROUP, piece, scale) * s_x
            }
            d @ (DType::F32 | DType::F16) if d.compiled() => {
                x.iter().enumerate().fold(0.0, |acc, (i, &q)| {
                    acc + self.dot(r, c0 + i, &[q as f32 * s_x])
                })
            }
            _ => 0.0,
        }
    }

    /// `sum_c W[r][c]` over the first `n` columns (at most the row's) of row `r` of an `i8` matrix,
    /// exact (the integer sum [`Matrix::dot_q`] takes against `n` ones); `None` for the other dtypes.
    pub(crate) fn row_sum_i8(&self, r: usize, n: usize) -> Option<i64> {
        let n = n.min(self.cols);
        if n == self.cols {
            if let Some(sum) = self.stored_row_sum(r) {
                return Some(sum);
            }
        }
        match self.dtype {
            d @ DType::I8 if d.compiled() => Some(match self.i8_slice(r, 0, n) {
                Some(w) => w.iter().map(|&b| (b as i8) as i64).sum(),
                None => int8::sum_place(
                    self.data,
                    (row_place(self.rows, self.cols, r), self.cols),
                    n,
                ),
            }),
            _ => None,
        }
    }

    /// Row `r`'s sum as the blob stores it, if it does.
    #[inline(always)]
    fn stored_row_sum(&self, r: usize) -> Option<i64> {
        let at = r.checked_mul(crate::blob::ROW_SUM_BYTES)?;
        let b = self.row_sums()?.get(at..at.checked_add(4)?)?;
        Some(i64::from(crate::arch::word(b) as i32))
    }

    /// Whether the blob stores this matrix's row sums (an `I8` matrix's, [`crate::blob::ROW_SUM_BYTES`]
    /// per row after its scales).
    pub fn has_row_sums(&self) -> bool {
        self.row_sums().is_some()
    }

    /// `out[r] += int8::rescale(sum_c W[r][c], s_r, c)` for the rows of an `i8` matrix whose blob
    /// stores its row sums (as far as `out` goes), one pass over the sums and the scales; `false`
    /// (nothing added) without them.
    pub(crate) fn add_stored_row_sums(&self, c: f32, out: &mut [f32]) -> bool {
        let Some(sums) = self.row_sums().filter(|_| DType::I8.compiled()) else {
            return false;
        };
        let scales = self.scales.chunks_exact(SCALE_BYTES);
        let rows = sums.chunks_exact(crate::blob::ROW_SUM_BYTES).zip(scales);
        for (o, (sum, scale)) in out.iter_mut().zip(rows) {
            let sum = i64::from(crate::arch::word(sum) as i32);
            *o += int8::rescale(sum, decode_finite_scale(scale), c);
        }
        true
    }

    /// `f(r, sum_c W[r][c])` for every row `r` of an `i8` matrix (the exact integer sums, whole rows),
    /// summed now (a blob's stored sums are [`Matrix::add_stored_row_sums`]'): a quad of rows at a
    /// time, the four-row int8 kernel against `ones` (lanes of ones, at least `cols / 2` words) if
    /// given, else [`int8::quad_word_sums`]; `false` (no call) for the other dtypes.
    pub(crate) fn each_row_sum_i8(
        &self,
        ones: Option<&[u32]>,
        mut f: impl FnMut(usize, i64),
    ) -> bool {
        if !(self.dtype == DType::I8 && DType::I8.compiled()) {
            return false;
        }
        let (rows, cols) = (self.rows, self.cols);
        let whole = rows - rows % 4;
        let quads = crate::blob::quads::quads_of(self.data, cols).take(whole / 4);
        for (q, quad) in quads.enumerate() {
            let words = match (quad.len() == 4 * cols, ones) {
                (true, Some(ones)) => {
                    let mut sums = [0i32; 4];
                    crate::arch::dot4_quads(quad, cols, ones, &mut sums);
                    sums.map(i64::from)
                }
                (true, None) => int8::quad_word_sums(quad, cols),
                (false, _) => [0; 4].map(|_| i64::MIN),
            };
            for (k, &sum) in words.iter().enumerate() {
                let r = 4 * q + k;
                // The tail columns one at a time (a short quad, which no blob has: the whole row).
                let from = if sum == i64::MIN { 0 } else { cols / 4 * 4 };
                let place = row_place(rows, cols, r);
                let tail = (from..cols).fold(0i64, |a, c| {
                    a + self
                        .data
                        .get(place.at(cols, c))
                        .map_or(0, |&b| (b as i8) as i64)
                });
                f(r, if sum == i64::MIN { tail } else { sum + tail });
            }
        }
        for r in whole..rows {
            f(r, self.row_sum_i8(r, cols).unwrap_or(0));
        }
        true
    }

    /// [`Matrix::dot_q`] for int16 activations: `W[r][c0 .. c0 + n] . x[c0 .. c0 + n]` (`x.get(c)`
    /// meets column `c`), integer for `i8` and `i4` matrices (0 for float ones, which never meet
    /// quantised activations in the forward pass).
    pub(crate) fn dot_wide(&self, r: usize, c0: usize, n: usize, x: Wide<'_>, s_x: f32) -> f32 {
        match self.dtype {
            d @ DType::I8 if d.compiled() => {
                let acc = match self.i8_slice(r, c0, n) {
                    Some(w) => int8::dot_wide_f32(w, x, c0),
                    None => {
                        let place = (row_place(self.rows, self.cols, r), self.cols);
                        int8::dot_place(self.data, place, c0, n, |i| x.get(c0 + i)) as f32
                    }
                };
                acc * (self.scale(r) * s_x)
            }
            d @ DType::I4 if d.compiled() => {
                int4::dot_wide(self.group_row(r), c0, n, x, |g| self.group_scale(r, g)) * s_x
            }
            d @ DType::I8G if d.compiled() => {
                let row = self.group_row(r);
                let piece =
                    |a, b| (a..b).fold(0i32, |acc, c| acc + self.group_weight(row, c) * x.get(c));
                groups::sum(c0, n, I8_GROUP, piece, |g| self.group_scale(r, g)) * s_x
            }
            _ => 0.0,
        }
    }

    /// Row `r` dequantised into `out` (`out.len()` values from column 0).
    pub fn row_into(&self, r: usize, out: &mut [f32]) {
        self.row_each(r, out, |o, w| *o = w);
    }

    /// `out += ` row `r` dequantised (`out.len()` values from column 0): the same bits as
    /// [`Matrix::row_into`] a scratch row and adding it, in one pass.
    pub fn add_row_to(&self, r: usize, out: &mut [f32]) {
        self.row_each(r, out, |o, w| *o += w);
    }

    /// `f(out[c], W[r][c])` for each column `c < out.len()` of row `r` dequantised (0 past the
    /// row or for a dtype not compiled in).
    #[inline(always)]
    fn row_each(&self, r: usize, out: &mut [f32], mut f: impl FnMut(&mut f32, f32)) {
        let start = r * self.cols;
        match self.dtype {
            d @ DType::F32 if d.compiled() => {
                let w = self
                    .data
                    .get(4 * start..4 * (start + self.cols))
                    .unwrap_or(&[]);
                out.iter_mut().zip(f32s(w)).for_each(|(o, w)| f(o, w));
            }
            d @ DType::F16 if d.compiled() => {
                let w = self
                    .data
                    .get(2 * start..2 * (start + self.cols))
                    .unwrap_or(&[]);
                out.iter_mut().zip(f16s(w)).for_each(|(o, w)| f(o, w));
            }
            d @ DType::I8 if d.compiled() => {
                // A word at a time (a quad's rows' words lie 16 bytes apart), then the tail.
                let s = self.scale(r);
                let (words, tail) = row_parts(self.data, self.rows, self.cols, r);
                let (body, rest) = out.split_at_mut(out.len().min(self.cols / 4 * 4));
                let mut value = |o: &mut f32, q: u8| f(o, (q as i8) as f32 * s);
                // A quad's row read as arrays of 16 bytes (its words' step), else (the row-major
                // rest, or a row `data` cuts short) word by word.
                let place = row_place(self.rows, self.cols, r);
                let whole = place.step == 4 * crate::blob::quads::QUAD
                    && quad_row_words(self.data, place.start, body, &mut value);
                if !whole {
                    for (o, w) in body.chunks_mut(4).zip(words) {
                        match (o, w) {
                            ([o0, o1, o2, o3], [w0, w1, w2, w3]) => {
                                value(o0, *w0);
                                value(o1, *w1);
                                value(o2, *w2);
                                value(o3, *w3);
                            }
                            (o, w) => o.iter_mut().zip(w).for_each(|(o, &q)| value(o, q)),
                        }
                    }
                }
                rest.iter_mut().zip(tail).for_each(|(o, &q)| value(o, q));
            }
            d @ DType::I4 if d.compiled() => {
                // One scale per group, one byte per two columns (a missing byte reads as 0).
                let row = self.group_row(r);
                let groups = self.cols.div_ceil(I4_GROUP);
                let n = out.len().min(self.cols);
                let (body, rest) = out[..n].split_at_mut(n / 2 * 2);
                let bytes = row.get(..n / 2).unwrap_or(&[]);
                // Whole column pairs (one byte each) group by group, both nibbles per byte.
                for (g, o) in body.chunks_mut(I4_GROUP).enumerate() {
                    let s = self.scale(r * groups + g);
                    let bytes = bytes.get(g * I4_GROUP / 2..).unwrap_or(&[]);
                    let pairs = o.chunks_exact_mut(2);
                    let missing = pairs.len().saturating_sub(bytes.len());
                    for (o, &b) in pairs.zip(bytes) {
                        f(&mut o[0], ((b << 4) as i8 >> 4) as f32 * s);
                        f(&mut o[1], (b as i8 >> 4) as f32 * s);
                    }
                    o.iter_mut().rev().take(2 * missing).for_each(|o| f(o, 0.0));
                }
                // An odd last column: the low nibble of its byte.
                if let Some(o) = rest.first_mut() {
                    let b = row.get(n / 2).copied().unwrap_or(0);
                    f(
                        o,
                        ((b << 4) as i8 >> 4) as f32 * self.scale(r * groups + (n - 1) / I4_GROUP),
                    );
                }
            }
            d @ DType::I8G if d.compiled() => {
                // A group's bytes, then its scale (0 past the row).
                let row = self.group_row(r);
                for (g, o) in out.chunks_mut(I8_GROUP).enumerate() {
                    let s = self.group_scale(r, g);
                    let q = row.get(g * I8_GROUP..).unwrap_or(&[]);
                    for (i, o) in o.iter_mut().enumerate() {
                        f(o, q.get(i).map_or(0.0, |&q| (q as i8) as f32 * s));
                    }
                }
            }
            _ => out.iter_mut().for_each(|o| f(o, 0.0)),
        }
    }
}

/// `value(o, w)` for each value `o` of `body` and its byte `w` of an `I8` quad's row, whose words lie
/// 16 bytes apart from `start` in `data`, the words read as arrays (no check per word): `true`, or
/// `false` (nothing done) when `data` does not hold every word.
#[inline(always)]
fn quad_row_words(
    data: &[u8],
    start: usize,
    body: &mut [f32],
    value: &mut impl FnMut(&mut f32, u8),
) -> bool {
    let (whole, part) = body.split_at_mut(body.len() / 4 * 4);
    let Ok(out) = bytemuck::try_cast_slice_mut::<f32, [f32; 4]>(whole) else {
        return false;
    };
    // The last word's values: `part`, or the last whole chunk when there is no part.
    let (out, last_out): (&mut [[f32; 4]], &mut [f32]) = match (part.is_empty(), out) {
        (true, out) => match out.split_last_mut() {
            Some((last, out)) => (out, last),
            None => return true,
        },
        (false, out) => (out, part),
    };
    // Every word but the last a whole step, the last its four bytes.
    const STEP: usize = 4 * crate::blob::quads::QUAD;
    let at = out.len().wrapping_mul(STEP);
    let span = data.get(start..).and_then(|d| d.get(..at.wrapping_add(4)));
    let Some((words, last)) = span.and_then(|s| s.split_at_checked(at)) else {
        return false;
    };
    let Ok(words) = bytemuck::try_cast_slice::<u8, [u8; STEP]>(words) else {
        return false;
    };
    for ([o0, o1, o2, o3], w) in out.iter_mut().zip(words) {
        value(o0, w[0]);
        value(o1, w[1]);
        value(o2, w[2]);
        value(o3, w[3]);
    }
    last_out
        .iter_mut()
        .zip(last)
        .for_each(|(o, &q)| value(o, q));
    true
}

/// In place: `x * w (+ b)`, for the norms that have parameters.
pub fn affine(w: Option<Vector<'_>>, b: Option<Vector<'_>>, x: &mut [f32]) {
    if let Some(w) = w {
        x.iter_mut().zip(w.iter()).for_each(|(v, w)| *v *= w);
    }
    if let Some(b) = b {
        b.add_to(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every column range of float rows, four rows per pass, gives `Matrix::dot`'s bits.
    #[test]
    fn dot_columns_has_the_bits_of_dot() {
        let mut next = crate::testing::lcg(7);
        for (rows, cols) in [(9, 13), (8, 16), (64, 64), (5, 3)] {
            let values: std::vec::Vec<f32> = (0..rows * cols)
                .map(|_| (next() >> 8) as f32 / (1 << 23) as f32 - 1.0)
                .collect();
            let data: std::vec::Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            // Aligned (the host path) and one byte off (the row-by-row path).
            let mut shifted = std::vec![0u8; data.len() + 4];
            let off = 4 - shifted.as_ptr() as usize % 4;
            shifted[off..off + data.len()].copy_from_slice(&data);
            let aligned = bytemuck::cast_slice::<f32, u8>(&values);
            for bytes in [aligned, &shifted[1..1 + data.len()]] {
                let m = Matrix::from_parts(DType::F32, rows, cols, bytes, &[]).unwrap();
                for (c0, n) in [
                    (0, cols),
                    (1, cols - 1),
                    (cols / 2, cols - cols / 2),
                    (2, 1),
                ] {
                    let x: std::vec::Vec<f32> =
                        (0..n).map(|_| (next() >> 9) as f32 / 1e6).collect();
                    let mut out = std::vec![f32::NAN; rows];
                    m.dot_columns(c0, &x, &mut out);
                    for (r, o) in out.iter().enumerate() {
                        assert_eq!(
                            o.to_bits(),
                            m.dot(r, c0, &x).to_bits(),
                            "{rows}x{cols} {c0} {r}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn from_parts_refuses_scales_a_blob_may_not_hold() {
        let data = [0x21u8, 0x0f];
        for (bits, ok) in [
            (0x3c00u16, true),
            (0x0001, true),
            (0x0000, false),
            (0x8000, false),
            (0xbc00, false),
            (0x7c00, false),
            (0x7e00, false),
        ] {
            let scales = bits.to_le_bytes();
            let m = Matrix::from_parts(DType::I4, 1, 4, &data, &scales);
            assert_eq!(m.is_some(), ok, "{bits:#x}");
        }
    }

    #[test]
    fn int8_readers_see_the_row_major_values_through_the_quads() {
        use crate::blob::quads::from_row_major;
        for (rows, cols) in [(9, 13), (8, 16), (5, 3), (4, 6), (3, 8)] {
            let data: std::vec::Vec<u8> = (0..rows * cols).map(|i| (i * 73 + 9) as u8).collect();
            let blob = from_row_major(rows, cols, &data);
            let scales: std::vec::Vec<u8> = (0..rows)
                .flat_map(|r| crate::blob::encode_scale(0.5 + r as f32).unwrap())
                .collect();
            let m = Matrix::from_parts(DType::I8, rows, cols, &blob, &scales).unwrap();
            let x: std::vec::Vec<i8> = (0..cols).map(|i| (i as i8).wrapping_mul(29)).collect();
            // In the kernels' lane order ([`Wide`]): slots 1 and 2 of each whole group swapped.
            let value = |c: usize| x[c] as i16 * 200;
            let wide: std::vec::Vec<i16> = (0..cols)
                .map(|c| match c / 4 * 4 + 4 <= cols {
                    true => value(c ^ (((c ^ (c >> 1)) & 1) * 3)),
                    false => value(c),
                })
                .collect();
            let wide_at = |c: usize| value(c) as i64;
            for r in 0..rows {
                let row = &data[r * cols..(r + 1) * cols];
                let value = |c: usize| (row[c] as i8) as f32 * m.scale(r);
                let mut out = std::vec![0.0f32; cols];
                m.row_into(r, &mut out);
                assert!(
                    (0..cols).all(|c| out[c] == value(c)),
                    "{rows}x{cols} row {r}"
                );
                // Outputs shorter and longer than the row, read into and added to.
                for len in [1, cols.saturating_sub(1), cols.saturating_sub(3), cols + 2] {
                    let (mut into, mut sum) = (std::vec![7.0f32; len], std::vec![1.5f32; len]);
                    m.row_into(r, &mut into);
                    m.add_row_to(r, &mut sum);
                    for c in 0..len {
                        let (want_into, want_sum) = match c < cols {
                            true => (value(c), 1.5 + value(c)),
                            false => (7.0, 1.5),
                        };
                        assert_eq!(
                            (into[c], sum[c]),
                            (want_into, want_sum),
                            "{rows}x{cols} {r} {len} {c}"
                        );
                    }
                }
                for n in [cols, cols - 1, cols / 2, cols + 3] {
                    let want = row[..n.min(cols)].iter().map(|&b| (b as i8) as i64).sum();
                    assert_eq!(m.row_sum_i8(r, n), Some(want), "{rows}x{cols} {r} {n}");
                }
                for c0 in [0, 1, cols / 2] {
                    let n = cols - c0;
                    let exact = |v: &dyn Fn(usize) -> i64| -> i64 {
                        (c0..cols).map(|c| (row[c] as i8) as i64 * v(c)).sum()
                    };
                    let want = int8::rescale(exact(&|c| x[c] as i64), m.scale(r), 0.25);
                    assert_eq!(
                        m.dot_q(r, c0, &x[c0..], 0.25),
                        want,
                        "{rows}x{cols} {r} {c0}"
                    );
                    let want = exact(&wide_at) as f32 * (m.scale(r) * 0.5);
                    assert_eq!(m.dot_wide(r, c0, n, Wide(&wide), 0.5), want);
                    let xf: std::vec::Vec<f32> = x[c0..].iter().map(|&v| v as f32).collect();
                    let want = (c0..cols).fold(0.0, |a, c| a + (row[c] as i8) as f32 * xf[c - c0]);
                    assert_eq!(m.dot(r, c0, &xf), want * m.scale(r));
                }
            }
        }
    }

    #[test]
    fn int4_rows_dequantise_nibble_by_nibble() {
        // Two rows of 40 columns: two groups each, the second partial.
        let data: std::vec::Vec<u8> = (0..40u32).map(|i| (i * 37 + 11) as u8).collect();
        let scales: std::vec::Vec<u8> = [0.5f32, 0.25, 2.0, 0.125]
            .iter()
            .flat_map(|&s| crate::blob::encode_scale(s).unwrap())
            .collect();
        // Even and odd widths, outputs past the row and shorter than it (odd or even).
        for (cols, len) in [(40, 41), (39, 39), (39, 40), (40, 33), (40, 34), (39, 1)] {
            let m = Matrix::from_parts(DType::I4, 2, cols, &data, &scales).unwrap();
            for r in 0..2 {
                let mut out = std::vec![9.0f32; len];
                m.row_into(r, &mut out);
                let n = len.min(cols);
                for (c, &o) in out.iter().enumerate().take(n) {
                    let row = &data[20 * r..20 * r + 20];
                    let want = int4::nibble(row, c) as f32 * m.scale(2 * r + c / 32);
                    assert_eq!(o, want, "{cols} x {len}: row {r} col {c}");
                }
                assert!(out[n..].iter().all(|&o| o == 9.0), "{cols} x {len}");
                let mut sum = std::vec![1.5f32; len];
                m.add_row_to(r, &mut sum);
                let want: std::vec::Vec<f32> = (0..len)
                    .map(|c| if c < n { 1.5 + out[c] } else { 1.5 })
                    .collect();
                assert_eq!(sum, want, "{cols} x {len}: row {r}");
            }
        }
    }
}
