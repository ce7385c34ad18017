//! Integer-only arithmetic for cores without an FPU: every step between an int8 embedding and the
//! logits in integers, as TFLite Micro's int8 path and I-BERT (Kim et al. 2021) compute it.
//!
//! - [`requantize`]: a real factor as a fixed-point multiplier and shift (`x * m * 2^(shift - 31)`,
//!   rounded), the rescaling between every two quantised tensors;
//! - [`exp`]: `e^x` for `x <= 0` in fixed point (range reduction by `ln 2`, a degree-7 polynomial);
//! - [`reciprocal`]: `1 / d` as a multiplier and exponent by Newton-Raphson, no division;
//! - [`softmax`]: the two above over a row of scores, probabilities in Q15;
//! - [`sqrt`]: the integer square root, and [`norm`]: LayerNorm and RMSNorm of an integer vector;
//! - [`rotary`]: rotary positions on int8 queries and keys, by a Q14 table of `cos` and `sin`;
//! - [`activation`]: an MLP activation (GELU, SiLU, ...) as an int8 -> int8 table built on the host,
//!   and [`interpolated`]: over int16 inputs, a 257-knot piecewise-linear table;
//! - [`units`]: int4 matrices' group scales as integer multiples of one unit per row, and their exact
//!   sums;
//! - [`zoom`]: a per-position power-of-two finer scale for an int8 input with outliers (the MLP's
//!   hidden vector);
//! - [`plan`]: the constants a blob of the integer-only arithmetic carries (fixed scales, multipliers,
//!   biases, the activation's knots), which `session::integer` runs a position with.
//!
//! Each function's doc comment states its worst error against its real definition, which its unit
//! tests measure over its whole input range (or, where that is too large to enumerate, every edge of it
//! and a dense sample). Nothing here panics on data: shifts are clamped and sums saturate or widen.

pub mod activation;
pub mod exp;
pub mod interpolated;
pub mod norm;
pub mod plan;
pub mod reciprocal;
pub mod requantize;
pub mod rotary;
pub mod softmax;
pub mod sqrt;
pub mod units;
pub mod zoom;
