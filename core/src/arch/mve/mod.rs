//! Armv8.1-M with Helium (MVE: Cortex-M55, M85): the four-row int8 kernels on `VMLADAVA.S16`;
//! everything else as on ARMv7E-M (`armv7em/`), whose DSP instructions and FPU loops these cores have.

pub(crate) mod dot4;

pub(crate) use super::armv7em::{
    add, centre4, divide4, exp_shifted, i8g_rows2, int4_matvec8, kv_heads8, mul_wide, mul_wide_u,
    pack_lanes, quad_f16, quad_f32, quantize16, quantize8, quantize8_i4, rescale, scores, smlad,
    smlald, sqrt, store_strided, sum4, sums4_lanes16, sxtb16, sxtb16_ror8, weight_bits, KV_HEADS8,
};
#[cfg(feature = "std")]
pub(crate) use super::armv7em::{widest, Widest};
pub(crate) use super::portable::{dot4_rescaled, RESCALES_QUADS};
pub(crate) use dot4::{dot4_quads, dot4_strided};
