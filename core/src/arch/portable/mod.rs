//! Plain Rust: every kernel of a target without its own (Cortex-M0/M3, RISC-V, ...), and what the
//! other targets share and fall back to. No `unsafe` but for [`strided::store_unchecked`], which the
//! other targets take. The entries that only other targets have return `None`, 0 or `false` here
//! (inlined: the caller's own Rust runs, as if they were not there).

use super::{Int16Parts, Int8Parts};

pub(crate) mod attention;
pub(crate) mod instructions;
pub(crate) mod lanes;
pub(crate) mod nibbles;
pub(crate) mod strided;
pub(crate) mod vector;
pub(crate) mod wide;

pub(crate) use attention::{pack_lanes, rescale, scores, weight_bits};
pub(crate) use instructions::{mul_wide, mul_wide_u, smlad, smlald, sxtb16, sxtb16_ror8};
pub(crate) use lanes::sums4_lanes16;
#[cfg(microlens_arch = "portable")]
pub(crate) use lanes::{dot4_quads_portable as dot4_quads, dot4_strided_portable as dot4_strided};
#[cfg(microlens_arch = "portable")]
pub(crate) use strided::store_stepped as store_strided;
pub(crate) use vector::{add, centre4, divide4, sqrt, sum4};

/// Whether [`kv_heads8`] writes the int8 cache's heads (a target's assembly does).
pub(crate) const KV_HEADS8: bool = false;

/// Whether [`dot4_rescaled`] takes the int8 matmuls (a target's assembly does).
pub(crate) const RESCALES_QUADS: bool = false;

/// A target's int8 quantisation in one call: values, lanes and scale, or `buf` back (here always).
#[inline(always)]
pub(crate) fn quantize8<'q>(
    _x: &[f32],
    buf: &'q mut [i8],
    _q_max: f32,
) -> Result<Int8Parts<'q>, &'q mut [i8]> {
    Err(buf)
}

/// [`quantize8`] with the lanes in the int4 kernel's order (here always `buf` back).
#[inline(always)]
pub(crate) fn quantize8_i4<'q>(
    _x: &[f32],
    buf: &'q mut [i8],
    _q_max: f32,
) -> Result<Int8Parts<'q>, &'q mut [i8]> {
    Err(buf)
}

/// A target's int16 quantisation in one call: lanes, values and scale, or `buf` back (here always).
#[inline(always)]
pub(crate) fn quantize16<'q>(
    _x: &[f32],
    buf: &'q mut [i8],
    _q_max: f32,
) -> Result<Int16Parts<'q>, &'q mut [i8]> {
    Err(buf)
}

/// A target's int8 KV cache writes of every head of a position: the heads written (here none).
#[inline(always)]
pub(crate) fn kv_heads8(
    _x: &[f32],
    _d_head: usize,
    _q: &mut [i8],
    _stride: usize,
    _scales: &mut [f32],
    _scale_stride: usize,
    _q_max: f32,
) -> usize {
    0
}

/// A target's rescaling four-row int8 kernel: the rows that took the bias, or `None` (here always).
#[inline(always)]
pub(crate) fn dot4_rescaled(
    _w: &[u8],
    _cols: usize,
    _lanes: &[u32],
    _out: &mut [f32],
    _scales: &[u8],
    _s_x: f32,
    _bias: &[u8],
) -> Option<usize> {
    None
}

/// A target's `i8g` rows in pairs: the rows done (here none).
#[inline(always)]
pub(crate) fn i8g_rows2(
    _words: &[u32],
    _cols: usize,
    _scales: &[u8],
    _lanes: &[u32],
    _s_x: f32,
    _out: &mut [f32],
) -> usize {
    0
}

/// A target's int4 kernel for int8 activations: whether it wrote `out` (here never).
#[inline(always)]
pub(crate) fn int4_matvec8(
    _words: &[u32],
    _groups: usize,
    _scales: &[u8],
    _lanes: &[u32],
    _s_x: f32,
    _out: &mut [f32],
) -> bool {
    false
}

/// A target's softmax exponentials: their sum, or `None` (here always).
#[inline(always)]
pub(crate) fn exp_shifted(_x: &mut [f32], _max: f32) -> Option<f32> {
    None
}

/// A target's four `f32` rows against `x`, or `None` (here always).
#[inline(always)]
pub(crate) fn quad_f32(_block: &[f32], _stride: usize, _x: &[f32]) -> Option<[f32; 4]> {
    None
}

/// A target's four `f16` rows against `x`, or `None` (here always).
#[inline(always)]
pub(crate) fn quad_f16(_block: &[u32], _stride: usize, _x: &[f32]) -> Option<[f32; 4]> {
    None
}

/// A loop to compile for the widest vector unit (the host's): here the loop as it is.
pub(crate) trait Widest {
    /// What the loop returns.
    type Out;
    /// The loop.
    fn run(self) -> Self::Out;
}

/// Runs `kernel` (no wider unit here).
#[inline(always)]
pub(crate) fn widest<K: Widest>(kernel: K) -> K::Out {
    kernel.run()
}
