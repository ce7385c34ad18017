//! A matrix applied to an activation vector in the arithmetic the model asks for: `f32`, or (with int8
//! activations and an integer matrix) int8 x int8 or int4 x int8 with integer accumulation.

use super::activations::{quantize, quantized, Quantized};
use super::{int4, int8, offset};
use crate::blob::{Activations, DType};
use crate::weights::Matrix;

/// Whether this build can meet a matrix in `f32` arithmetic: with float weights or float activations.
/// Without either (an int8-only firmware) every matrix `Model::from_bytes` accepts is integer and every
/// input is quantised, so the float path is left out.
const FLOAT_PATH: bool = cfg!(any(
    feature = "weights-f32",
    feature = "weights-f16",
    feature = "activations-f32"
));

/// An activation vector ready to be multiplied, the one way into a matrix: the `f32` values, plus
/// their per-token int8 quantisation (held in the caller's scratch) when the model computes with int8
/// activations. Quantised once, it serves every matrix that reads the same vector (`W_Q`, `W_K` and
/// `W_V` share one). A vector mostly of one sign meets its matrix as a [`Centred`] input instead.
#[derive(Debug)]
pub(crate) struct Input<'x> {
    x: &'x [f32],
    scratch: &'x mut [i8],
    /// The scale of the int8 values in `scratch`, for int8 activations.
    scale: Option<f32>,
}

impl<'x> Input<'x> {
    /// `x` as `activations` dictate: quantised into `scratch` (at least `x.len()` long) for
    /// [`Activations::I8`].
    pub(crate) fn new(x: &'x [f32], activations: Activations, scratch: &'x mut [i8]) -> Self {
        // A build without `activations-f32` only ever meets int8-activation models: it quantises
        // unconditionally, so the float path is not compiled in.
        let int8 = activations == Activations::I8 || !Activations::F32.compiled();
        let scale = (int8 && Activations::I8.compiled()).then(|| quantize(x, scratch).scale);
        Input { x, scratch, scale }
    }

    /// The int8 values, if quantised.
    fn q(&self) -> Option<Quantized<'_>> {
        let n = self.x.len();
        self.scale.map(|scale| quantized(self.scratch, n, scale))
    }

    /// `W[r][c0 .. c0 + n] . x[c0 .. c0 + n]`: integer for an `i8`/`i4` matrix and int8 input, `f32`
    /// otherwise.
    pub(crate) fn dot(&self, w: &Matrix<'_>, r: usize, c0: usize, n: usize) -> f32 {
        let range = c0..c0.saturating_add(n);
        match self.q() {
            Some(q) if matches!(w.dtype(), DType::I8 | DType::I4) => {
                w.dot_q(r, c0, q.q.get(range).unwrap_or(&[]), q.scale)
            }
            _ if FLOAT_PATH => w.dot(r, c0, self.x.get(range).unwrap_or(&[])),
            _ => 0.0,
        }
    }

    /// `out[r] = W[r] . x` for every row, as [`Input::dot`] with the arithmetic chosen once per matrix:
    /// an `i8` matrix meets int8 inputs in [`int8::matvec`], four rows at a time.
    pub(crate) fn matvec(&self, w: &Matrix<'_>, out: &mut [f32]) {
        let n = self.x.len();
        let rows = out.len().min(w.rows());
        let out = &mut out[..rows];
        match self.q() {
            Some(q) if w.dtype() == DType::I8 && DType::I8.compiled() => {
                let x = q.q.get(..n).unwrap_or(&[]);
                int8::matvec(w.data(), w.cols(), w.scales(), x, q.lanes, q.scale, out);
            }
            Some(q) if w.dtype() == DType::I4 && DType::I4.compiled() => {
                // Two rows at a time where the input spans whole groups, the rest row by row.
                let done = match n == w.cols() {
                    true => int4::matvec4(w.data(), n, w.scales(), q.lanes, q.scale, out),
                    false => 0,
                };
                for (r, o) in out.iter_mut().enumerate().skip(done) {
                    *o = self.dot(w, r, 0, n);
                }
            }
            _ if FLOAT_PATH => w.matvec(self.x, out),
            _ => out.fill(0.0),
        }
    }
}

/// An [`Input`] for one integer matrix, centred on its mid-range first ([`offset`]): for a vector mostly
/// of one sign (the MLP's activated hidden vector), where the int8 grid then spans `[min, max]`.
#[derive(Debug)]
pub(crate) struct Centred<'x> {
    input: Input<'x>,
    /// The mid-range subtracted from `x` ([`offset::centre`]), 0 if not centred.
    offset: f32,
}

impl<'x> Centred<'x> {
    /// `x` for the matrix `w`: with int8 activations and an integer `w`, centred in place on its
    /// mid-range `c` before it is quantised as [`Input::new`] does; otherwise `x` as it is.
    pub(crate) fn new(
        x: &'x mut [f32],
        activations: Activations,
        w: &Matrix<'_>,
        scratch: &'x mut [i8],
    ) -> Self {
        let integer = matches!(w.dtype(), DType::I8 | DType::I4);
        let offset = if activations == Activations::I8 && integer {
            offset::centre(x)
        } else {
            0.0
        };
        let input = Input::new(x, activations, scratch);
        Centred { input, offset }
    }

    /// [`Input::matvec`], then `c` times `W`'s row sums added back ([`offset::add_row_sums`], which
    /// reuses the scratch: the input is spent).
    pub(crate) fn matvec(self, w: &Matrix<'_>, out: &mut [f32]) {
        self.input.matvec(w, out);
        if self.offset != 0.0 {
            offset::add_row_sums(w, self.offset, self.input.scratch, out);
        }
    }
}
