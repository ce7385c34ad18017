//! ARMv7-M without the DSP extension (Cortex-M3; `microlens_arch = "armv7m"`): the int8 matmuls'
//! four-row loop in assembly ([`rows`]), every other entry `portable/`'s plain Rust.

mod rows;

pub(crate) use super::portable::lanes::dot4_strided_portable as dot4_strided;
pub(crate) use super::portable::strided::store_stepped as store_strided;
pub(crate) use super::portable::*;
pub(crate) use rows::dot4_quads;
