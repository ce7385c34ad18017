//! A matrix applied to an activation vector in the arithmetic the model asks for: `f32`, or (with int8
//! activations and an integer matrix) int8, grouped int8 or int4 weights against int8 or int16
//! activations with integer accumulation.

use super::activations::{quantize, quantize16, quantize_i4, quantized, quantized16, Quantized};
use super::{int4_rows, int8, int8_groups, offset};
use crate::blob::{Activations, DType};
use crate::weights::{Matrix, Vector};

/// Whether this build can meet a matrix in `f32` arithmetic: with float weights or float activations.
/// Without either (an int8-only firmware) every matrix `Model::from_bytes` accepts is integer and every
/// input is quantised, so the float path is left out.
const FLOAT_PATH: bool = cfg!(any(
    feature = "weights-f32",
    feature = "weights-f16",
    feature = "activations-f32"
));

/// How a build quantises the inputs of a model computing with `activations`: `None` for `f32`, else
/// int16 (`true`) or int8 (`false`). A build without `activations-f32` only ever meets integer
/// models, and one with a single integer width only that one, so the others are not compiled in.
#[inline(always)]
pub(crate) fn width(activations: Activations) -> Option<bool> {
    let (i8, i16) = (Activations::I8.compiled(), Activations::I16.compiled());
    let integer = activations.integer() || !Activations::F32.compiled();
    let wide = match (i8, i16) {
        (true, true) => matches!(activations, Activations::I16 | Activations::I16Kv16),
        (_, i16) => i16,
    };
    (integer && (i8 || i16)).then_some(wide)
}

/// Quantises `x` into `scratch` as [`width`] says (`wide`: int16).
#[inline(always)]
pub(crate) fn quantize_as<'q>(x: &[f32], wide: bool, scratch: &'q mut [i8]) -> Quantized<'q> {
    match wide {
        true => quantize16(x, scratch),
        false => quantize(x, scratch),
    }
}

/// Whether `n` positions computing with `activations` meet their matrices together
/// ([`matmul_rows`]): on the host (feature `std`; a constant `false` without it), more than one
/// position, `f32` inputs. Integer activations are quantised per position and go one at a time
/// (their kernels' sums are exact, in any order).
#[inline(always)]
pub(crate) fn batched(activations: Activations, n: usize) -> bool {
    cfg!(feature = "std") && FLOAT_PATH && n > 1 && width(activations).is_none()
}

/// `out_p = W x_p (+ b)` for `n` `f32` inputs `x_p`, rows of `xs` `W.cols()` wide, into rows of
/// `outs` `out_width` apart: each exactly [`Input::matvec`] of `x_p` with `f32` activations (the
/// bias added after the product). On the host one load of the weights serves several positions
/// ([`Matrix::matmul`]).
pub(crate) fn matmul_rows(
    w: &Matrix<'_>,
    bias: Option<&Vector<'_>>,
    xs: &[f32],
    n: usize,
    outs: &mut [f32],
    out_width: usize,
) {
    let xs = xs.get(..n.saturating_mul(w.cols())).unwrap_or(&[]);
    let rows = out_width.min(w.rows());
    #[cfg(feature = "std")]
    w.matmul(xs, n, outs, out_width);
    for (p, out) in outs.chunks_mut(out_width.max(1)).take(n).enumerate() {
        let out = out.get_mut(..rows).unwrap_or(&mut []);
        #[cfg(not(feature = "std"))]
        w.matvec(xs.get(p * w.cols()..(p + 1) * w.cols()).unwrap_or(&[]), out);
        let _ = p;
        if let Some(b) = bias {
            b.add_to(out);
        }
    }
}

/// An activation vector ready to be multiplied, the one way into a matrix: the `f32` values, plus
/// their per-token int8 or int16 quantisation (held in the caller's scratch) when the model computes
/// with integer activations. Quantised once, it serves every matrix that reads the same vector (`W_Q`,
/// `W_K` and `W_V` share one). A vector mostly of one sign meets its matrix as a [`Centred`] input
/// instead.
#[derive(Debug)]
pub(crate) struct Input<'x> {
    x: &'x [f32],
    scratch: &'x mut [i8],
    /// The scale of the integer values in `scratch` and what they are, for integer activations.
    scale: Option<(f32, Held)>,
}

/// What an [`Input`]'s scratch holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// int8 values, their lanes in the int8 kernel's order.
    I8,
    /// int8 values, their lanes in the int4 kernel's order ([`int4_rows::rearrange`]).
    I8ForI4,
    /// int16 values.
    I16,
}

impl<'x> Input<'x> {
    /// `x` as `activations` dictate: quantised into `scratch` (at least `3 * x.len()` bytes) for integer
    /// activations.
    pub(crate) fn new(x: &'x [f32], activations: Activations, scratch: &'x mut [i8]) -> Self {
        // A build whose only integer matrices are int4 quantises straight into their lanes' order.
        let i4_only = DType::I4.compiled() && !DType::I8.compiled() && !DType::I8G.compiled();
        let scale = width(activations).map(|wide| match (wide, i4_only) {
            (false, true) => (quantize_i4(x, scratch).scale, Held::I8ForI4),
            (true, _) => (quantize_as(x, true, scratch).scale, Held::I16),
            (false, false) => (quantize_as(x, false, scratch).scale, Held::I8),
        });
        Input { x, scratch, scale }
    }

    /// Puts the int8 values' lanes in the order of the int4 kernel (`for_i4`) or of the int8 one: in
    /// place, once for all the matrices of one dtype that read this input.
    fn order_lanes(&mut self, for_i4: bool) {
        // Without int4 matrices the lanes always stay in the int8 order, without int8 ones in the
        // int4 order ([`Input::new`]).
        if !DType::I4.compiled() || !(DType::I8.compiled() || DType::I8G.compiled()) {
            return;
        }
        let want = if for_i4 { Held::I8ForI4 } else { Held::I8 };
        if let Some((scale, held @ (Held::I8 | Held::I8ForI4))) = self.scale {
            if held != want {
                let words = self.q().map_or(0, |q| q.lanes.len());
                // The lanes follow the `n` values, word-aligned (`quantize`).
                let n = self.x.len();
                let lanes = self.scratch.get_mut(n..n + 4 * words).unwrap_or(&mut []);
                int4_rows::rearrange(bytemuck::try_cast_slice_mut(lanes).unwrap_or(&mut []));
                self.scale = Some((scale, want));
            }
        }
    }

    /// The integer values, if quantised.
    fn q(&self) -> Option<Quantized<'_>> {
        let n = self.x.len();
        self.scale.map(|(scale, held)| match held {
            Held::I16 => quantized16(self.scratch, n, scale),
            Held::I8 | Held::I8ForI4 => quantized(self.scratch, n, scale),
        })
    }

    /// `W[r][c0 .. c0 + n] . x[c0 .. c0 + n]`: integer for an `i8`/`i4` matrix and quantised input,
    /// `f32` otherwise.
    pub(crate) fn dot(&self, w: &Matrix<'_>, r: usize, c0: usize, n: usize) -> f32 {
        let range = c0..c0.saturating_add(n);
        match self.q() {
            Some(q) if w.dtype().integer() => match q.wide.is_empty() {
                true => w.dot_q(r, c0, q.q.get(range).unwrap_or(&[]), q.scale),
                false => w.dot_wide(r, c0, n, q.wide, q.scale),
            },
            _ if FLOAT_PATH => w.dot(r, c0, self.x.get(range).unwrap_or(&[])),
            _ => 0.0,
        }
    }

    /// `out[r] = W[r][c0 .. c0 + n] . x[c0 .. c0 + n]` for every row `r < out.len()`, as [`Input::dot`]
    /// (float inputs through [`Matrix::dot_columns`]).
    pub(crate) fn dot_rows(&self, w: &Matrix<'_>, c0: usize, n: usize, out: &mut [f32]) {
        let range = c0..c0.saturating_add(n);
        match (self.q(), self.x.get(range)) {
            (None, Some(x)) if FLOAT_PATH && out.len() <= w.rows() => w.dot_columns(c0, x, out),
            _ => {
                for (r, o) in out.iter_mut().enumerate() {
                    *o = self.dot(w, r, c0, n);
                }
            }
        }
    }

    /// `out[r] = W[r] . x` for every row, as [`Input::dot`] with the arithmetic chosen once per matrix
    /// (an `i8` matrix meets integer inputs in [`int8::matvec`], four rows at a time, an `i4` one in
    /// [`int4_rows::matvec4`], two at a time), then `out[r] += b[r]` for a bias `b`
    /// ([`Vector::add_to`]; the int8 kernel adds it as it rescales, the same bits).
    pub(crate) fn matvec(&mut self, w: &Matrix<'_>, bias: Option<&Vector<'_>>, all: &mut [f32]) {
        let n = self.x.len();
        let rows = all.len().min(w.rows());
        let out = &mut all[..rows];
        let mut biased = 0;
        self.order_lanes(w.dtype() == DType::I4);
        match self.q() {
            Some(q) if w.dtype() == DType::I8 && DType::I8.compiled() => {
                let b = bias.map_or(&[][..], |b| b.bytes());
                int8::matvec(w.data(), w.cols(), w.scale_bytes(), &q, b, out);
                biased = rows;
            }
            Some(q) if matches!(w.dtype(), DType::I4 | DType::I8G) && w.dtype().compiled() => {
                // The grouped kernels where the input spans whole groups (int4 two rows at a time),
                // the rest row by row.
                let (d, s) = (w.data(), w.scale_bytes());
                let done = match (n == w.cols(), w.dtype()) {
                    (true, DType::I4) => int4_rows::matvec4(d, n, s, &q, out),
                    (true, _) => int8_groups::matvec(d, n, s, &q, out),
                    (false, _) => 0,
                };
                for (r, o) in out.iter_mut().enumerate().skip(done) {
                    *o = self.dot(w, r, 0, n);
                }
            }
            _ if FLOAT_PATH => w.matvec(self.x, out),
            _ => out.fill(0.0),
        }
        if let (Some(b), true) = (bias, biased < all.len()) {
            let rest = Vector::new(b.bytes().get(4 * biased..).unwrap_or(&[]));
            rest.add_to(all.get_mut(biased..).unwrap_or(&mut []));
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
    /// `x` for the matrix `w`: with integer activations and an integer `w`, centred in place on its
    /// mid-range `c` before it is quantised as [`Input::new`] does; otherwise `x` as it is.
    pub(crate) fn new(
        x: &'x mut [f32],
        activations: Activations,
        w: &Matrix<'_>,
        scratch: &'x mut [i8],
    ) -> Self {
        let integer = w.dtype().integer();
        let offset = if width(activations).is_some() && integer {
            offset::centre(x)
        } else {
            0.0
        };
        let input = Input::new(x, activations, scratch);
        Centred { input, offset }
    }

    /// [`Input::matvec`], then `c` times `W`'s row sums added back ([`offset::add_row_sums`], which
    /// reuses the scratch: the input is spent).
    pub(crate) fn matvec(mut self, w: &Matrix<'_>, out: &mut [f32]) {
        self.input.matvec(w, None, out);
        if self.offset != 0.0 {
            offset::add_row_sums(w, self.offset, self.input.scratch, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn one_input_meets_int4_and_int8_matrices_in_any_order() {
        // 6 rows of 64 columns: two int4 groups per row, whole pairs of rows for the int4 kernel;
        // then 40 columns (an int4 group and a part: row by row), and 37 (no whole groups of 8
        // either: the grouped int8 rows row by row too).
        for (rows, cols) in [(6usize, 64usize), (5, 40), (3, 37)] {
            let nibbles: Vec<u8> = (0..rows * cols.div_ceil(2))
                .map(|i| (i as u32).wrapping_mul(0x9e37_79b9).to_le_bytes()[3])
                .collect();
            let bytes: Vec<u8> = (0..rows * cols).map(|i| (i * 89 % 251) as u8).collect();
            let scale = |n: usize| -> Vec<u8> {
                (0..n)
                    .flat_map(|i| crate::blob::encode_scale(0.125 + i as f32 / 16.0).unwrap())
                    .collect()
            };
            let (s4, s8, s8g) = (
                scale(rows * cols.div_ceil(32)),
                scale(rows),
                scale(rows * cols.div_ceil(8)),
            );
            let w4 = Matrix::from_parts(DType::I4, rows, cols, &nibbles, &s4).unwrap();
            let w8 = Matrix::from_parts(DType::I8, rows, cols, &bytes, &s8).unwrap();
            let w8g = Matrix::from_parts(DType::I8G, rows, cols, &bytes, &s8g).unwrap();
            let x: Vec<f32> = (0..cols).map(|i| ((i * 37) % 23) as f32 - 11.5).collect();
            for act in [Activations::I8, Activations::I16] {
                let mut scratch = std::vec![0u32; cols];
                let mut input = Input::new(&x, act, bytemuck::cast_slice_mut(&mut scratch));
                for w in [&w4, &w8g, &w4, &w8, &w8g, &w4, &w8, &w8] {
                    let want: Vec<f32> = (0..rows).map(|r| input.dot(w, r, 0, cols)).collect();
                    let mut out = std::vec![0.0f32; rows];
                    input.matvec(w, None, &mut out);
                    let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&out), bits(&want), "{:?} {act:?} {cols}", w.dtype());
                }
            }
        }
    }
}
