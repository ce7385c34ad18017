//! ARMv7E-M with an FPU (Cortex-M4F, M7, M33; and under Helium's int8 kernels, the M55): the DSP
//! instructions (`SXTB16`, `SMLAD`, `SMLALD`) and the loops built on them and on the FPU in assembly
//! (`asm!`, or `global_asm!` functions with the C calling convention), each the portable Rust's
//! operations in the same order, so the same bits.

pub(crate) mod attention;
// The DSP loops of the int8 four-row kernels, which Helium's replace.
#[cfg(microlens_arch = "armv7em")]
pub(crate) mod dot4;
pub(crate) mod dsp;
#[cfg(not(feature = "fast-math"))]
pub(crate) mod exp;
pub(crate) mod groups;
pub(crate) mod int4;
pub(crate) mod lanes16;
pub(crate) mod quantize;
pub(crate) mod rows;
pub(crate) mod vector;

#[cfg(all(microlens_arch = "armv7em", not(feature = "weights-i8")))]
pub(crate) use super::portable::dot4_rescaled;
#[cfg(feature = "fast-math")]
pub(crate) use super::portable::exp_shifted;
pub(crate) use super::portable::strided::store_unchecked as store_strided;
pub(crate) use super::portable::{mul_wide, mul_wide_u};
#[cfg(feature = "std")]
pub(crate) use super::portable::{widest, Widest};
pub(crate) use attention::{pack_lanes, rescale, scores, weight_bits};
#[cfg(all(microlens_arch = "armv7em", feature = "weights-i8"))]
pub(crate) use dot4::dot4_rescaled;
#[cfg(microlens_arch = "armv7em")]
pub(crate) use dot4::{dot4_quads, dot4_strided};
pub(crate) use dsp::{smlad, smlald, sxtb16, sxtb16_ror8};
#[cfg(not(feature = "fast-math"))]
pub(crate) use exp::exp_shifted;
pub(crate) use groups::rows2 as i8g_rows2;
pub(crate) use lanes16::sums4_f32 as sums4_lanes16;
pub(crate) use quantize::{heads8 as kv_heads8, quantize16, quantize8, quantize8_i4};
pub(crate) use vector::{add, centre4, divide4, sqrt, sum4};

/// Whether [`kv_heads8`] writes the int8 cache's heads: yes.
pub(crate) const KV_HEADS8: bool = true;

/// Whether [`dot4_rescaled`] takes the int8 matmuls: where int8 matrices are built.
#[cfg(microlens_arch = "armv7em")]
pub(crate) const RESCALES_QUADS: bool = cfg!(feature = "weights-i8");

/// The four `f32` rows in assembly.
#[inline(always)]
pub(crate) fn quad_f32(block: &[f32], stride: usize, x: &[f32]) -> Option<[f32; 4]> {
    Some(rows::f32(block, stride, x))
}

/// The four `f16` rows in assembly.
#[inline(always)]
pub(crate) fn quad_f16(block: &[u32], stride: usize, x: &[f32]) -> Option<[f32; 4]> {
    Some(rows::f16(block, stride, x))
}

/// The int4 kernel for int8 activations in assembly: always `true`.
#[inline(always)]
pub(crate) fn int4_matvec8(
    words: &[u32],
    groups: usize,
    scales: &[u8],
    lanes: &[u32],
    s_x: f32,
    out: &mut [f32],
) -> bool {
    int4::matvec(words, groups, scales, lanes, s_x, out);
    true
}
