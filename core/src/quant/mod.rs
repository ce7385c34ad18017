//! The integer side of quantised models: per-token int8 quantisation of activations
//! ([`activations`]), the int8 x int8 (`int8`), int4 x int8 (`int4`) and grouped int8 (`int8_groups`) dot products with integer
//! accumulation, a matrix applied in the model's arithmetic (`linear`), the attention's fixed-point
//! value mix (`mix`), the centring of one-signed inputs ([`offset`]), and (feature `encode`) the weight
//! row encoders the converter uses.
//!
//! Every float operation here happens in one fixed order (no reassociation, no FMA), and each rounding
//! to an integer is spelled out on the float's bits (activations to nearest even, weights half away
//! from zero), so a quantised model computes the same bits on every target.

pub mod activations;
pub(crate) mod attention_loops;
pub(crate) mod dot4;
#[cfg(feature = "encode")]
pub mod encode;
#[cfg(feature = "arith-integer")]
pub(crate) mod exact;
pub(crate) mod groups;
pub(crate) mod int4;
pub(crate) mod int4_rows;
pub(crate) mod int8;
pub(crate) mod int8_groups;
pub(crate) mod linear;
pub(crate) mod mix;
pub mod offset;
pub mod quantized;
