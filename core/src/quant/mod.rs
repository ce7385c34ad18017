//! The integer side of quantised models: per-token int8 quantisation of activations
//! ([`activations`]), the int8 x int8 ([`int8`]) and int4 x int8 ([`int4`]) dot products with integer
//! accumulation, a matrix applied in the model's arithmetic ([`linear`]), the attention's fixed-point
//! value mix ([`mix`]), the centring of one-signed inputs ([`offset`]), and the weight row encoders the
//! converter uses ([`encode`]).
//!
//! Every float operation here happens in one fixed order (no reassociation, no FMA), and rounding gives
//! the integers `libm::roundf` gives, so a quantised model computes the same bits on every target.

pub mod activations;
pub mod dsp;
pub mod encode;
pub mod int4;
pub mod int8;
pub mod linear;
pub mod mix;
#[cfg(all(feature = "mve", target_arch = "arm"))]
pub(crate) mod mve;
pub mod offset;

pub use activations::{quantize, Quantized};
pub use linear::{matvec, Input};
