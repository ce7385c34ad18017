//! One matrix's whole blocks of [`LANES`] rows, widened to `f32` and column-blocked: the rows of a
//! block interleaved column by column, so one column of a block is one contiguous run of [`LANES`]
//! values, and its matrix-vector product [`LANES`] rows at a time, one SIMD lane per row. Each lane
//! is still its row's dot product summed left to right from 0, a separate multiply then add per
//! column (Rust never contracts to a fused multiply-add), followed by the same scale multiplications
//! in the same order as the device's one-row kernels in `weights.rs`: the same bits.

use std::vec::Vec;

use crate::arch::{widest, Widest};
use crate::blob::{widen_f16, DType, I4_GROUP};
use crate::quant::int4;

/// Rows per block: one `f32` lane each (four SSE registers, two AVX, one AVX-512).
pub const LANES: usize = 16;

/// The column-blocked, `f32`-widened copy of one matrix's whole blocks of [`LANES`] rows.
pub(crate) struct Blocked {
    cols: usize,
    /// Rows covered: whole blocks only.
    rows: usize,
    /// `w[(b * cols + c) * LANES + l] = W[b * LANES + l][c]`, widened exactly to `f32` (`i8` and `i4`
    /// values as their integers).
    w: Vec<f32>,
    /// How the lanes' sums are scaled.
    scales: Scales,
}

/// The per-row scales of an integer matrix, in the order the device applies them.
enum Scales {
    /// `f32`, `f16`: none.
    None,
    /// `i8`: `sum * s[r]`; one scale per row.
    Row(Vec<f32>),
    /// `i4`: `total += sum_g * s[r][g]` after each group of [`I4_GROUP`] columns;
    /// `s[(b * groups + g) * LANES + l]`.
    Group(Vec<f32>),
}

impl core::fmt::Debug for Blocked {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Blocked({} x {})", self.rows, self.cols)
    }
}

impl Blocked {
    /// The blocked copy of the whole blocks of a `[rows, cols]` matrix stored as `data` in `dtype`
    /// whose scale `i` is `scale(i)` (`None` if it has no whole block, or an uncompiled dtype).
    pub(crate) fn new(
        dtype: DType,
        [rows, cols]: [usize; 2],
        data: &[u8],
        scale: impl Fn(usize) -> f32,
    ) -> Option<Self> {
        let all_rows = rows;
        let rows = rows - rows % LANES;
        if rows == 0 || cols == 0 || !dtype.compiled() {
            return None;
        }
        let value: std::boxed::Box<dyn Fn(usize, usize) -> f32> = match dtype {
            // `i8g` meets integer activations (its default); with `f32` ones it goes row by row.
            DType::I8G => return None,
            DType::F32 => std::boxed::Box::new(|r, c| {
                let i = 4 * (r * cols + c);
                f32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]])
            }),
            DType::F16 => std::boxed::Box::new(|r, c| {
                let i = 2 * (r * cols + c);
                widen_f16(u16::from_le_bytes([data[i], data[i + 1]]))
            }),
            DType::I8 => std::boxed::Box::new(move |r, c| {
                (data[crate::blob::quads::offset(all_rows, cols, r, c)] as i8) as f32
            }),
            DType::I4 => {
                let row_bytes = DType::I4.row_bytes(cols)?;
                std::boxed::Box::new(move |r, c| {
                    int4::nibble(&data[r * row_bytes..(r + 1) * row_bytes], c) as f32
                })
            }
        };
        let mut w = Vec::with_capacity(rows * cols);
        for b in 0..rows / LANES {
            for c in 0..cols {
                w.extend((0..LANES).map(|l| value(b * LANES + l, c)));
            }
        }
        let groups = cols.div_ceil(I4_GROUP);
        let scale = &scale;
        let scales = match dtype {
            DType::I8 => Scales::Row((0..rows).map(scale).collect()),
            DType::I4 => Scales::Group(
                (0..rows / LANES)
                    .flat_map(|b| {
                        (0..groups).flat_map(move |g| {
                            (0..LANES).map(move |l| scale((b * LANES + l) * groups + g))
                        })
                    })
                    .collect(),
            ),
            _ => Scales::None,
        };
        Some(Blocked {
            cols,
            rows,
            w,
            scales,
        })
    }

    /// `out[r] = W[r] . x` for the rows of whole blocks, exactly as `Matrix::matvec` computes each;
    /// returns how many leading rows of `out` it wrote (0 unless `x` is a whole row).
    pub(crate) fn matvec(&self, x: &[f32], out: &mut [f32]) -> usize {
        if x.len() != self.cols {
            return 0;
        }
        let rows = self.rows.min(out.len() - out.len() % LANES);
        let out = &mut out[..rows];
        dispatch(self, x, out);
        rows
    }
}

/// Positions per pass of [`Blocked::matmul`]: one load of a block's column serves this many
/// independent accumulator chains.
const POSITIONS: usize = 4;

/// The rows of a matrix product: `n` inputs `cols` wide, `n` outputs `out_width` apart.
struct Rows<'x> {
    xs: &'x [f32],
    n: usize,
    out_width: usize,
}

impl Blocked {
    /// `outs[p * out_width + r] = W[r] . xs[p * cols ..][.. cols]` for each of `n` positions `p`
    /// and the rows `r` of whole blocks, each exactly as [`Blocked::matvec`] computes it (the same
    /// chains, [`POSITIONS`] of them per load of a block's column); returns how many leading rows
    /// of each output it wrote (0 unless the inputs are `n` whole rows and the outputs fit).
    pub(crate) fn matmul(&self, xs: &[f32], n: usize, outs: &mut [f32], out_width: usize) -> usize {
        let rows = self.rows.min(out_width - out_width % LANES);
        let fits = n.checked_mul(self.cols) == Some(xs.len())
            && n.checked_mul(out_width)
                .is_some_and(|len| len <= outs.len());
        if !fits || rows == 0 {
            return 0;
        }
        let r = Rows { xs, n, out_width };
        dispatch_rows(self, &r, rows, outs);
        rows
    }
}

/// [`blocks_rows`] as a loop for the widest vector unit.
struct BlocksRows<'a, 'x> {
    b: &'a Blocked,
    r: &'a Rows<'x>,
    rows: usize,
    outs: &'a mut [f32],
}

impl Widest for BlocksRows<'_, '_> {
    type Out = ();
    #[inline(always)]
    fn run(self) {
        blocks_rows(self.b, self.r, self.rows, self.outs)
    }
}

/// Runs [`blocks_rows`] compiled for the widest vector unit the CPU has.
fn dispatch_rows(b: &Blocked, r: &Rows<'_>, rows: usize, outs: &mut [f32]) {
    widest(BlocksRows { b, r, rows, outs })
}

/// Every block of `b` (the first `rows` rows) against every input of `r`: [`POSITIONS`] inputs per
/// pass over a block, then the last ones one at a time, each lane scaled as [`blocks`] does.
#[inline(always)]
fn blocks_rows(b: &Blocked, r: &Rows<'_>, rows: usize, outs: &mut [f32]) {
    let cols = b.cols;
    let x = |p: usize| &r.xs[p * cols..(p + 1) * cols];
    let whole = r.n - r.n % POSITIONS;
    for (k, w) in
        b.w.chunks_exact(cols * LANES)
            .take(rows / LANES)
            .enumerate()
    {
        let mut write = |p: usize, acc: [f32; LANES]| {
            let at = p * r.out_width + k * LANES;
            outs[at..at + LANES].copy_from_slice(&acc);
        };
        for p in (0..whole).step_by(POSITIONS) {
            let xs: [&[f32]; POSITIONS] = core::array::from_fn(|i| x(p + i));
            for (i, acc) in block_dot(b, k, w, xs).into_iter().enumerate() {
                write(p + i, acc);
            }
        }
        for p in whole..r.n {
            write(p, block_dot(b, k, w, [x(p)])[0]);
        }
    }
}

/// Block `k` of `b` (its weights `w`) against `P` inputs, scaled as [`blocks`] scales one.
#[inline(always)]
fn block_dot<const P: usize>(
    b: &Blocked,
    k: usize,
    w: &[f32],
    xs: [&[f32]; P],
) -> [[f32; LANES]; P] {
    match &b.scales {
        Scales::None => lanes_dot_n(w, xs),
        Scales::Row(s) => {
            let s = &s[k * LANES..(k + 1) * LANES];
            lanes_dot_n(w, xs).map(|acc| core::array::from_fn(|l| acc[l] * s[l]))
        }
        Scales::Group(s) => {
            let groups = b.cols.div_ceil(I4_GROUP);
            let s = &s[k * groups * LANES..(k + 1) * groups * LANES];
            let mut total = [[0.0f32; LANES]; P];
            let parts = w.chunks(I4_GROUP * LANES).zip(s.chunks_exact(LANES));
            for (g, (w, s)) in parts.enumerate() {
                let end = ((g + 1) * I4_GROUP).min(b.cols);
                let part = xs.map(|x| &x[g * I4_GROUP..end]);
                for (t, acc) in total.iter_mut().zip(lanes_dot_n(w, part)) {
                    for ((t, a), s) in t.iter_mut().zip(acc).zip(s) {
                        *t += a * s;
                    }
                }
            }
            total
        }
    }
}

/// [`lanes_dot`] of `P` inputs at once: one load of each column of `w` serves `P` chains, each
/// `acc[p][l] = sum_c w[c * LANES + l] * xs[p][c]` from 0 in column order, multiply then add.
#[inline(always)]
fn lanes_dot_n<const P: usize>(w: &[f32], xs: [&[f32]; P]) -> [[f32; LANES]; P] {
    let mut acc = [[0.0f32; LANES]; P];
    let n = xs.iter().map(|x| x.len()).min().unwrap_or(0);
    for (c, w) in w.chunks_exact(LANES).take(n).enumerate() {
        for (acc, x) in acc.iter_mut().zip(&xs) {
            let x = x[c];
            for (a, &w) in acc.iter_mut().zip(w) {
                *a += w * x;
            }
        }
    }
    acc
}

/// [`blocks`] as a loop for the widest vector unit.
struct Blocks<'a> {
    b: &'a Blocked,
    x: &'a [f32],
    out: &'a mut [f32],
}

impl Widest for Blocks<'_> {
    type Out = ();
    #[inline(always)]
    fn run(self) {
        blocks(self.b, self.x, self.out)
    }
}

/// Runs [`blocks`] compiled for the widest vector unit the CPU has.
fn dispatch(b: &Blocked, x: &[f32], out: &mut [f32]) {
    widest(Blocks { b, x, out })
}

/// Every block of `b` against `x` into `out` (whole blocks, `x.len() == b.cols`).
#[inline(always)]
fn blocks(b: &Blocked, x: &[f32], out: &mut [f32]) {
    let cols = b.cols;
    let per_block = cols * LANES;
    let blocks = b.w.chunks_exact(per_block).zip(out.chunks_exact_mut(LANES));
    match &b.scales {
        Scales::None => {
            for (w, o) in blocks {
                o.copy_from_slice(&lanes_dot(w, x));
            }
        }
        Scales::Row(s) => {
            for ((w, o), s) in blocks.zip(s.chunks_exact(LANES)) {
                let acc = lanes_dot(w, x);
                for ((o, a), s) in o.iter_mut().zip(acc).zip(s) {
                    *o = a * s;
                }
            }
        }
        Scales::Group(s) => {
            let groups = cols.div_ceil(I4_GROUP);
            for ((w, o), s) in blocks.zip(s.chunks_exact(groups * LANES)) {
                let mut total = [0.0f32; LANES];
                let parts = w.chunks(I4_GROUP * LANES).zip(x.chunks(I4_GROUP));
                for ((w, x), s) in parts.zip(s.chunks_exact(LANES)) {
                    let acc = lanes_dot(w, x);
                    for ((t, a), s) in total.iter_mut().zip(acc).zip(s) {
                        *t += a * s;
                    }
                }
                o.copy_from_slice(&total);
            }
        }
    }
}

/// `acc[l] = sum_c w[c * LANES + l] * x[c]`, each lane from 0 in column order, multiply then add.
#[inline(always)]
fn lanes_dot(w: &[f32], x: &[f32]) -> [f32; LANES] {
    let mut acc = [0.0f32; LANES];
    for (w, &x) in w.chunks_exact(LANES).zip(x) {
        for (a, &w) in acc.iter_mut().zip(w) {
            *a += w * x;
        }
    }
    acc
}
