//! The host (feature `std`): the int8 four-row kernels, the softmax's exponentials and the blocked
//! float products with the CPU's vector units (AVX2, AVX, AVX-512F on x86-64, detected at run time;
//! plain Rust elsewhere), the same bits. Everything else is `portable/`'s.

pub(crate) mod dot4;
pub(crate) mod exp;
pub(crate) mod simd;

pub(crate) use super::portable::strided::store_unchecked as store_strided;
pub(crate) use super::portable::{
    add, centre4, divide4, dot4_rescaled, i8g_rows2, int4_matvec8, kv_heads8, mul_wide, mul_wide_u,
    pack_lanes, quad_f16, quad_f32, quantize16, quantize8, quantize8_i4, rescale, scores, smlad,
    smlald, sqrt, sum4, sums4_lanes16, sxtb16, sxtb16_ror8, weight_bits, KV_HEADS8, RESCALES_QUADS,
};
pub(crate) use dot4::{dot4_quads, dot4_strided};
pub(crate) use exp::exp_shifted;
pub(crate) use simd::{widest, Widest};
