//! ARMv6-M (Cortex-M0, M0+; `microlens_arch = "armv6m"`): the int8 matmuls' four-row loop in
//! assembly ([`rows`]), the widening multiplies from 16-bit halves (`portable/wide.rs`: no 64-bit
//! multiply), every other entry `portable/`'s plain Rust.

mod rows;

pub(crate) use super::portable::lanes::dot4_strided_portable as dot4_strided;
pub(crate) use super::portable::strided::store_stepped as store_strided;
pub(crate) use super::portable::wide::{
    mul_wide_halves as mul_wide, mul_wide_u_halves as mul_wide_u,
};
pub(crate) use super::portable::*;
pub(crate) use rows::dot4_quads;
