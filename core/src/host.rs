//! Host throughput (feature `std`, never in a firmware): the same forward pass, the same bits, wider
//! loops.
//!
//! [`HostWeights`] is a copy of a model's matrices, widened to `f32` and column-blocked: [`LANES`]
//! consecutive rows interleaved column by column, so one column of a block is one contiguous run of
//! [`LANES`] values. [`Model::with_host`] attaches it; every float matrix-vector product of that model
//! then runs [`LANES`] rows at a time, one SIMD lane per row. Each lane is still its row's dot product
//! summed left to right from 0, a separate multiply then add per column (Rust never contracts to a
//! fused multiply-add), followed by the same scale multiplications in the same order as the device's
//! one-row kernels in `weights.rs`: the loop order across rows changes, the arithmetic of every output
//! does not, so the bits are the device's (pinned by `tests/` and the kernel tests below).
//!
//! Rows past the last whole block, matrices that are not whole `x`-long rows and the int8-activation
//! kernels (exact integers: their order does not matter) take the ordinary path.

use std::vec::Vec;

use crate::blob::{widen_f16, DType, I4_GROUP};
use crate::math::softmax;
use crate::model::Model;
use crate::quant::int4;
use crate::weights::Matrix;

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
    /// The blocked copy of `m`'s whole blocks (`None` if it has none, or an uncompiled dtype).
    fn new(m: &Matrix<'_>) -> Option<Self> {
        let (cols, rows) = (m.cols(), m.rows() - m.rows() % LANES);
        if rows == 0 || cols == 0 || !m.dtype().compiled() {
            return None;
        }
        let data = m.data();
        let value: std::boxed::Box<dyn Fn(usize, usize) -> f32> = match m.dtype() {
            DType::F32 => std::boxed::Box::new(|r, c| {
                let i = 4 * (r * cols + c);
                f32::from_le_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]])
            }),
            DType::F16 => std::boxed::Box::new(|r, c| {
                let i = 2 * (r * cols + c);
                widen_f16(u16::from_le_bytes([data[i], data[i + 1]]))
            }),
            DType::I8 => std::boxed::Box::new(|r, c| (data[r * cols + c] as i8) as f32),
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
        let scales = match m.dtype() {
            DType::I8 => Scales::Row((0..rows).map(|r| m.scale(r)).collect()),
            DType::I4 => Scales::Group(
                (0..rows / LANES)
                    .flat_map(|b| {
                        (0..groups).flat_map(move |g| {
                            (0..LANES).map(move |l| m.scale((b * LANES + l) * groups + g))
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

/// Runs [`blocks`] compiled for the widest vector unit the CPU has.
fn dispatch(b: &Blocked, x: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (just detected), the only requirement of `blocks_avx512`.
            #[allow(unsafe_code)]
            unsafe {
                blocks_avx512(b, x, out)
            };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU has AVX (just detected), the only requirement of `blocks_avx`.
            #[allow(unsafe_code)]
            unsafe {
                blocks_avx(b, x, out)
            };
            return;
        }
    }
    blocks(b, x, out)
}

/// [`blocks`] with AVX-512F: the same operations on wider registers (no fused multiply-add: the
/// feature set enables none, and Rust never contracts).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn blocks_avx512(b: &Blocked, x: &[f32], out: &mut [f32]) {
    blocks(b, x, out)
}

/// [`blocks`] with AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn blocks_avx(b: &Blocked, x: &[f32], out: &mut [f32]) {
    blocks(b, x, out)
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

/// The int8 kernel `quant::dsp::dot4_strided` on the host: `out[r] = sum_i rows[r * stride + i] *
/// x[i]` for whole quads of rows over the groups of four columns every row of the quad has, `x` given as
/// its sign-extended lane pairs. Integer sums (wrapping, as `SMLAD`; the callers keep them far from
/// overflow) are exact in any order: the same values as the device, summed by the CPU's widest SIMD.
pub(crate) fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    let lane = |v: u32| v as u16 as i16 as i32;
    // The lanes as `i32` values, on the stack for the usual widths.
    let (mut small, mut large) = ([0i32; 1024], Vec::new());
    let len = lanes.len() / 2 * 4;
    let x = if len <= small.len() {
        &mut small[..len]
    } else {
        large.resize(len, 0);
        &mut large[..]
    };
    for (x, p) in x.chunks_exact_mut(4).zip(lanes.chunks_exact(2)) {
        x.copy_from_slice(&[lane(p[0]), lane(p[1]), lane(p[0] >> 16), lane(p[1] >> 16)]);
    }
    dot4_dispatch(rows, stride, x, out)
}

fn dot4_dispatch(rows: &[u8], stride: usize, x: &[i32], out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just detected), the only requirement of `dot4_avx2`.
        #[allow(unsafe_code)]
        unsafe {
            dot4_avx2(rows, stride, x, out)
        };
        return;
    }
    dot4_rows(rows, stride, x, out)
}

/// [`dot4_rows`] with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot4_avx2(rows: &[u8], stride: usize, x: &[i32], out: &mut [i32]) {
    dot4_rows(rows, stride, x, out)
}

#[inline(always)]
fn dot4_rows(rows: &[u8], stride: usize, x: &[i32], out: &mut [i32]) {
    for (q, sums) in out.chunks_exact_mut(4).enumerate() {
        let row = |k: usize| {
            let r = (4 * q + k).saturating_mul(stride);
            rows.get(r..).unwrap_or(&[])
        };
        // Whole words of every row of the quad, as many as there are lanes.
        let n = (0..4)
            .map(|k| row(k).len() / 4)
            .min()
            .unwrap_or(0)
            .min(x.len() / 4)
            * 4;
        let quad = [row(0), row(1), row(2), row(3)].map(|r| &r[..n]);
        // The four rows together, eight columns at a time into eight partial sums each, then the
        // columns left over (wrapping sums: exact in any order).
        let whole = n - n % 8;
        let mut acc = [[0i32; 8]; 4];
        for (c, x) in x[..whole].chunks_exact(8).enumerate() {
            for (acc, r) in acc.iter_mut().zip(&quad) {
                for ((a, &w), &x) in acc.iter_mut().zip(&r[8 * c..8 * c + 8]).zip(x) {
                    *a = a.wrapping_add((w as i8 as i32) * x);
                }
            }
        }
        for ((s, acc), r) in sums.iter_mut().zip(&acc).zip(&quad) {
            let part = acc.iter().fold(0i32, |a, &v| a.wrapping_add(v));
            *s = r[whole..]
                .iter()
                .zip(&x[whole..n])
                .fold(part, |a, (&w, &x)| a.wrapping_add((w as i8 as i32) * x));
        }
    }
}

/// The softmax's first half on the host, [`softmax::exp_shifted`] with the same bits:
/// `x_i <- libm::expf(x_i - max)`, returning their sum added in order. `libm::expf` (FreeBSD's
/// `e_expf.c`) is straight-line `f32` arithmetic on the range a softmax meets, `2⁻¹⁴ < |x| < 87.33`
/// (and `1 + x` below it): eight values at a time, every lane the same operations in the same
/// order (no fused multiply-add), so the same bits; any other value (|x| ≥ 87.33, infinities, NaN)
/// is `libm::expf` itself. With `fast-math` (micromath's `exp`) it is the core's loop.
pub(crate) fn exp_shifted(x: &mut [f32], max: f32) -> f32 {
    #[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just detected), the only requirement of `exp_shifted_avx2`.
        #[allow(unsafe_code)]
        return unsafe { exp_shifted_avx2(x, max) };
    }
    softmax::exp_shifted(x, max)
}

/// [`exp_lanes`] over `x` with AVX2, then the ordered sum.
#[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
#[target_feature(enable = "avx2")]
fn exp_shifted_avx2(x: &mut [f32], max: f32) -> f32 {
    // Whole passes, then the last values in a padded one (the padding's lanes are dropped).
    for c in x.chunks_mut(EXP_LANES) {
        let mut v = [0.0f32; EXP_LANES];
        for (v, x) in v.iter_mut().zip(c.iter()) {
            *v = x - max;
        }
        let (e, ok) = exp_lanes(v);
        for (((c, e), ok), v) in c.iter_mut().zip(e).zip(ok).zip(v) {
            *c = if ok { e } else { libm::expf(v) };
        }
    }
    let mut sum = 0.0f32;
    for v in x.iter() {
        sum += v;
    }
    sum
}

/// Values per pass of [`exp_lanes`].
#[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
const EXP_LANES: usize = 8;

/// `libm::expf` of each lane, and whether the lane is in the range computed here (`|x| < 87.33`, not
/// NaN); the other lanes' values are meaningless. The steps and constants of libm 0.2's `expf`, with
/// its three argument reductions (`k` from `x / ln 2` rounded, `±1`, or `0` where `hi = x`, `lo = 0`
/// give the same operations) selected per lane, and `scalbnf(y, k)` as the product by `2^k` it is for
/// `|k| <= 126`.
#[cfg(all(target_arch = "x86_64", not(feature = "fast-math")))]
#[inline(always)]
fn exp_lanes(x: [f32; EXP_LANES]) -> ([f32; EXP_LANES], [bool; EXP_LANES]) {
    const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
    const LN2_LO: f32 = f32::from_bits(0x35bf_be8e);
    const INV_LN2: f32 = f32::from_bits(0x3fb8_aa3b);
    const P1: f32 = f32::from_bits(0x3e2a_aa8f);
    const P2: f32 = f32::from_bits(0xbb35_5215);
    let mut out = [0.0f32; EXP_LANES];
    let mut ok = [false; EXP_LANES];
    for i in 0..EXP_LANES {
        let x = x[i];
        let sign = x.to_bits() & 0x8000_0000;
        let hx = x.to_bits() & 0x7fff_ffff;
        // `(INV_LN2 * x + HALF[sign]) as i32` (truncation: `trunc` is exact, and small here);
        // `1 - 2 sign` is `±1`.
        let half = f32::from_bits(0x3f00_0000 | sign);
        let big = (INV_LN2 * x + half).trunc();
        let one = f32::from_bits(0x3f80_0000 | sign);
        let kf = if hx > 0x3f85_1592 {
            big
        } else if hx > 0x3eb1_7218 {
            one
        } else {
            0.0
        };
        let hi = x - kf * LN2_HI;
        let lo = kf * LN2_LO;
        let r = hi - lo;
        let xx = r * r;
        let c = r - xx * (P1 + xx * P2);
        let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
        // `2^k` for `|k| <= 126` (out-of-range lanes are not `ok`; clamped to stay finite).
        let k = kf.clamp(-126.0, 127.0) as i32;
        let scale = f32::from_bits(((0x7f + k) as u32) << 23);
        out[i] = if hx > 0x3900_0000 { y * scale } else { 1.0 + x };
        ok[i] = hx < 0x42ae_ac50;
    }
    (out, ok)
}

/// A model's matrices, column-blocked for the host (16 rows per block): build once per model with
/// [`HostWeights::new`], attach with [`Model::with_host`]. About the size of the model in `f32`.
#[derive(Debug)]
pub struct HostWeights {
    /// The blob data it was built from (address and length), so it attaches only to that model.
    source: (usize, usize),
    /// Per tensor slot, the blocked matrix (`None` for vectors and matrices without whole blocks).
    mats: Vec<Option<Blocked>>,
}

impl HostWeights {
    /// The blocked copy of every matrix of `model`.
    pub fn new(model: &Model<'_>) -> Self {
        let mats = model
            .catalogue_ids()
            .map(|id| model.matrix(id).and_then(|m| Blocked::new(&m)))
            .collect();
        HostWeights {
            source: model.data_span(),
            mats,
        }
    }

    /// Whether it was built from the blob `model` reads.
    pub(crate) fn fits(&self, model: &Model<'_>) -> bool {
        self.source == model.data_span()
    }

    /// The blocked matrix of tensor slot `slot`.
    pub(crate) fn get(&self, slot: usize) -> Option<&Blocked> {
        self.mats.get(slot).and_then(Option::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::encode_scale;
    use std::vec;

    /// Pseudo-random bytes.
    fn bytes(n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn host_dot4_has_the_sums_of_one_row_at_a_time() {
        let mut seed = 3u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            seed
        };
        for (rows_n, cols, stride) in [
            (4, 64, 64),
            (8, 36, 40),
            (12, 13, 13),
            (4, 4, 4),
            (8, 200, 200),
        ] {
            let rows: Vec<u8> = (0..rows_n * stride).map(|_| next() as u8).collect();
            let x: Vec<i32> = (0..cols / 4 * 4).map(|_| next() as i16 as i32).collect();
            let lanes: Vec<u32> = x
                .chunks_exact(4)
                .flat_map(|c| {
                    let pack = |a: i32, b: i32| (a as u16 as u32) | ((b as u16 as u32) << 16);
                    [pack(c[0], c[2]), pack(c[1], c[3])]
                })
                .collect();
            let mut got = vec![0i32; rows_n];
            dot4_strided(&rows, stride, &lanes, &mut got);
            let n = cols / 4 * 4;
            for (r, g) in got.iter().enumerate() {
                let want = rows[r * stride..r * stride + n]
                    .iter()
                    .zip(&x)
                    .fold(0i32, |a, (&w, &x)| a.wrapping_add((w as i8 as i32) * x));
                assert_eq!(*g, want, "{rows_n} x {cols} row {r}");
            }
        }
    }

    #[test]
    fn host_exp_has_the_bits_of_libm() {
        let mut values: Vec<f32> = [
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            6.1e-5,
            -6.1e-5,
            0.3465,
            -0.3466,
            0.5,
            -1.0397,
            1.0398,
            -87.33,
            -87.34,
            -88.0,
            -103.9,
            -104.0,
            -1e4,
            f32::NEG_INFINITY,
            f32::NAN,
            88.7,
            89.0,
        ]
        .to_vec();
        let mut seed = 7u32;
        for i in 0..20_000 {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let unit = (seed >> 8) as f32 / (1u32 << 24) as f32;
            values.push(match i % 3 {
                0 => -120.0 * unit,
                1 => -2.0 * unit,
                _ => f32::from_bits(seed) % 100.0,
            });
        }
        for max in [0.0f32, 3.5, -2.0] {
            for row in values.chunks(61) {
                let (mut a, mut b) = (row.to_vec(), row.to_vec());
                let (sa, sb) = (exp_shifted(&mut a, max), softmax::exp_shifted(&mut b, max));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "{row:?}");
                assert_eq!(sa.to_bits(), sb.to_bits());
            }
        }
    }

    /// Every `f32` bit pattern through the host's exponentials and through the core's loop (with
    /// `max = 0`, so `x - max` is `x`): about a minute in release on two cores, so not in the default
    /// run: `cargo test --release -p microlens --features std --lib -- --ignored every_f32`.
    #[test]
    #[ignore]
    fn host_exp_has_the_bits_of_libm_for_every_f32() {
        const CHUNK: u64 = 1 << 16;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        let chunks = (1u64 << 32) / CHUNK;
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    let (mut a, mut b) = (
                        std::vec![0.0f32; CHUNK as usize],
                        std::vec![0.0f32; CHUNK as usize],
                    );
                    for c in (t..chunks).step_by(threads as usize) {
                        for (i, (a, b)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
                            *a = f32::from_bits((c * CHUNK + i as u64) as u32);
                            *b = *a;
                        }
                        // A `max` the compiler cannot see (a constant 0 lets it drop `x - 0`,
                        // which quiets a signalling NaN at run time).
                        let max = std::hint::black_box(0.0);
                        exp_shifted(&mut a, max);
                        softmax::exp_shifted(&mut b, max);
                        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                            assert_eq!(
                                x.to_bits(),
                                y.to_bits(),
                                "x bits {:#010x}",
                                c * CHUNK + i as u64
                            );
                        }
                    }
                });
            }
        });
    }

    #[test]
    fn blocked_matvec_has_the_bits_of_the_row_kernels() {
        for (dtype, rows, cols) in [
            (DType::F32, 48, 37),
            (DType::F16, 33, 64),
            (DType::I8, 32, 70),
            (DType::I4, 35, 75),
        ] {
            let n = dtype.data_len(rows, cols).unwrap();
            let mut data = bytes(n, 7 + rows as u32);
            if dtype == DType::F32 {
                // Finite values of a sensible range.
                for (i, c) in data.chunks_exact_mut(4).enumerate() {
                    let v = (i as f32 * 0.618).sin() * 3.0 / (1.0 + (i % 7) as f32);
                    c.copy_from_slice(&v.to_le_bytes());
                }
            }
            if dtype == DType::F16 {
                for c in data.chunks_exact_mut(2) {
                    c[1] &= 0x3f; // no infinities or NaNs
                }
            }
            let scales: Vec<u8> = (0..dtype.n_scales(rows, cols).unwrap())
                .flat_map(|i| encode_scale(0.25 + (i % 97) as f32 / 64.0).unwrap())
                .collect();
            let m = Matrix::from_parts(dtype, rows, cols, &data, &scales).unwrap();
            let b = Blocked::new(&m).unwrap();
            let x: Vec<f32> = (0..cols).map(|i| (i as f32 * 1.37).cos() * 2.1).collect();
            let mut want = vec![0.0f32; rows];
            m.matvec(&x, &mut want);
            let mut got = vec![f32::NAN; rows];
            let done = b.matvec(&x, &mut got);
            assert_eq!(done, rows - rows % LANES);
            for r in 0..done {
                assert_eq!(got[r].to_bits(), want[r].to_bits(), "{dtype:?} row {r}");
                assert_eq!(m.dot(r, 0, &x).to_bits(), want[r].to_bits());
            }
            let with = m.with_blocked(Some(&b));
            let mut both = vec![f32::NAN; rows];
            with.matvec(&x, &mut both);
            for r in 0..rows {
                assert_eq!(both[r].to_bits(), want[r].to_bits(), "{dtype:?} row {r}");
            }
        }
    }
}
