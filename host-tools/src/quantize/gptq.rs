//! GPTQ (Frantar et al. 2022): error-compensating rounding of one matrix `W` (`[outputs][inputs]`)
//! given the second moment `H = E[x xᵀ]` of its inputs. The inputs are quantised one column at a time,
//! and each column's rounding error is pushed onto the columns not yet quantised so that `W x` over the
//! calibration inputs moves as little as possible. The integers and scales fill exactly the blob layout
//! the nearest rounding of [`super::encode_matrix`] fills (int8: one scale per row, fixed before the row
//! is quantised; int4: one scale per group of 32 inputs, chosen when the group is reached), with the
//! core's own rounding and `f16`-rounded-up scales, so the device maths is unchanged.

use anyhow::{anyhow, ensure, Result};
use microlens::blob::{TensorData, I4_GROUP};
use microlens::quant::activations::quantize_one;
use microlens::quant::encode::{weight_scale, I4_MAX};
use microlens::{DType, TensorId};
use nalgebra::DMatrix;

/// Damping added to the diagonal of `H` before inverting it, as a fraction of its mean diagonal.
pub const DAMPING: f64 = 0.01;

/// Clipping factors tried for an int8 row scale (`max|w| * f / 127`); the one whose result moves the
/// row's calibration output least is kept. 1 (no clipping) comes first and wins ties.
pub const I8_CLIPS: [f32; 6] = [1.0, 0.98, 0.96, 0.94, 0.92, 0.9];

/// What GPTQ needs of one input space: `H` (row-major, `n x n`, undamped) and the upper Cholesky
/// factor `U` of the damped `H⁻¹`, whose rows carry the error feedback.
#[derive(Clone, Debug)]
pub struct Solver {
    n: usize,
    h: DMatrix<f64>,
    u: DMatrix<f64>,
}

impl Solver {
    /// The solver for second moment `h` (`n x n`, row-major, symmetric positive semi-definite). An
    /// input that is always 0 (zero diagonal) is decoupled from the others and rounded to nearest.
    pub fn new(h: &[f64], n: usize, damping: f64) -> Result<Solver> {
        ensure!(
            h.len() == n * n,
            "{} values for a {n} x {n} Hessian",
            h.len()
        );
        ensure!(
            h.iter().all(|v| v.is_finite()),
            "the calibration Hessian has a NaN or infinite value"
        );
        let h = DMatrix::from_row_slice(n, n, h);
        let mut damped = h.clone();
        for i in 0..n {
            if damped[(i, i)] <= 0.0 {
                damped.row_mut(i).fill(0.0);
                damped.column_mut(i).fill(0.0);
                damped[(i, i)] = 1.0;
            }
        }
        let mean_diag = damped.diagonal().mean();
        for i in 0..n {
            damped[(i, i)] += damping * mean_diag;
        }
        let not_pd = || anyhow!("the calibration Hessian is not positive definite");
        let inverse = damped.cholesky().ok_or_else(not_pd)?.inverse();
        let u = inverse.cholesky().ok_or_else(not_pd)?.l().transpose();
        Ok(Solver { n, h, u })
    }

    /// The identity solver: no feedback, so GPTQ is exactly nearest rounding.
    pub fn identity(n: usize) -> Solver {
        Solver {
            n,
            h: DMatrix::identity(n, n),
            u: DMatrix::identity(n, n),
        }
    }

    /// Inputs.
    pub fn n(&self) -> usize {
        self.n
    }

    /// `eᵀ H e`: how much an error `e` on one row moves that row's output, summed over the calibration
    /// inputs (divided by their number).
    pub fn output_error(&self, e: &[f64]) -> f64 {
        let e = nalgebra::DVector::from_column_slice(e);
        e.dot(&(&self.h * &e))
    }

    /// Quantises one row: the integers (int8 range, or int4 range for `I4`) and the scales (one for
    /// `I8`, one per group of 32 for `I4`), or `None` if a scale is out of the `f16` range. `clip` shrinks
    /// the int8 scale (1 is `max|w| / 127`).
    fn row(&self, w: &[f32], dtype: DType, clip: f32) -> Option<(Vec<i8>, Vec<f32>)> {
        let n = self.n;
        let mut work: Vec<f64> = w.iter().map(|&v| v as f64).collect();
        let mut q = vec![0i8; n];
        let mut scales = Vec::new();
        let mut scale = match dtype {
            DType::I8 => weight_scale(w, 127.0 / clip)?,
            _ => 0.0,
        };
        if dtype == DType::I8 {
            scales.push(scale);
        }
        for c in 0..n {
            let limit = if dtype == DType::I4 {
                if c % I4_GROUP == 0 {
                    let end = (c + I4_GROUP).min(n);
                    let group: Vec<f32> = work[c..end].iter().map(|&v| v as f32).collect();
                    scale = weight_scale(&group, I4_MAX)?;
                    scales.push(scale);
                }
                7
            } else {
                127
            };
            let x = work[c];
            let qc = quantize_one(x as f32, scale).clamp(-limit, limit);
            q[c] = qc;
            let err = (x - qc as f64 * scale as f64) / self.u[(c, c)];
            for j in c + 1..n {
                work[j] -= err * self.u[(c, j)];
            }
        }
        Some((q, scales))
    }

    /// [`Solver::row`] for the int8 clipping factor of `clips` that moves the row's output least (`I4`
    /// ignores `clips`).
    fn best_row(&self, w: &[f32], dtype: DType, clips: &[f32]) -> Option<(Vec<i8>, Vec<f32>)> {
        let clips = if dtype == DType::I8 { clips } else { &[1.0] };
        let mut best: Option<(f64, (Vec<i8>, Vec<f32>))> = None;
        for &clip in clips {
            let (q, s) = self.row(w, dtype, clip)?;
            let e: Vec<f64> = dequantize_row(&q, &s, dtype)
                .iter()
                .zip(w)
                .map(|(a, b)| *b as f64 - *a as f64)
                .collect();
            let err = self.output_error(&e);
            if best.as_ref().is_none_or(|(b, _)| err < *b) {
                best = Some((err, (q, s)));
            }
        }
        best.map(|(_, r)| r)
    }
}

/// The value each integer of a row stands for.
fn dequantize_row(q: &[i8], scales: &[f32], dtype: DType) -> Vec<f32> {
    q.iter()
        .enumerate()
        .map(|(c, &v)| {
            let s = match dtype {
                DType::I4 => scales[c / I4_GROUP],
                _ => scales[0],
            };
            v as f32 * s
        })
        .collect()
}

/// Packs a row's integers as the blob stores them: one byte each for `I8`, two per byte (low nibble
/// first) for `I4`.
fn pack_row(q: &[i8], dtype: DType, out: &mut [u8]) {
    match dtype {
        DType::I4 => {
            out.iter_mut().for_each(|b| *b = 0);
            for (c, &v) in q.iter().enumerate() {
                out[c / 2] |= ((v as u8) & 0x0f) << (4 * (c % 2));
            }
        }
        _ => out.iter_mut().zip(q).for_each(|(o, &v)| *o = v as u8),
    }
}

/// Encodes a `[rows, cols]` matrix of row-major `values` as `dtype` (`I8` or `I4`) with GPTQ rounding
/// against `solver` (for `cols` inputs), trying the int8 row clipping factors `clips` (`&[1.0]`: none).
pub fn encode_matrix(
    id: TensorId,
    shape: [usize; 2],
    values: &[f32],
    dtype: DType,
    solver: &Solver,
    clips: &[f32],
) -> Result<TensorData> {
    let [rows, cols] = shape;
    ensure!(
        matches!(dtype, DType::I8 | DType::I4),
        "GPTQ rounds to i8 or i4, not {}",
        dtype.name()
    );
    ensure!(
        values.len() == rows * cols && solver.n() == cols,
        "tensor {id}: {} values and a {}-input Hessian for shape {shape:?}",
        values.len(),
        solver.n()
    );
    ensure!(
        values.iter().all(|v| v.is_finite()),
        "tensor {id} has a NaN or infinite value"
    );
    let row_bytes = match dtype {
        DType::I4 => cols.div_ceil(2),
        _ => cols,
    };
    let mut data = vec![0u8; rows * row_bytes];
    let mut scales = Vec::new();
    for (row, out) in values
        .chunks(cols.max(1))
        .zip(data.chunks_mut(row_bytes.max(1)))
    {
        let (q, s) = solver.best_row(row, dtype, clips).ok_or_else(|| {
            anyhow!(
                "tensor {id} has a value beyond the {} scale range",
                dtype.name()
            )
        })?;
        pack_row(&q, dtype, out);
        scales.extend(s);
    }
    Ok(TensorData {
        id,
        dtype,
        shape,
        data,
        scales,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantize::{decode_matrix, encode_matrix as nearest};
    use microlens::TensorKind;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// `samples x n` correlated inputs (a random mixing of independent ones, with uneven scales).
    fn inputs(samples: usize, n: usize, rng: &mut ChaCha8Rng) -> Vec<f32> {
        let mix: Vec<f32> = (0..n * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        (0..samples)
            .flat_map(|_| {
                let z: Vec<f32> = (0..n)
                    .map(|i| rng.random_range(-1.0..1.0) * (1.0 + i as f32 / 4.0))
                    .collect();
                (0..n)
                    .map(|i| (0..n).map(|j| mix[i * n + j] * z[j]).sum::<f32>())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn second_moment(x: &[f32], n: usize) -> Vec<f64> {
        let mut h = vec![0.0; n * n];
        for row in x.chunks(n) {
            for i in 0..n {
                for j in 0..n {
                    h[i * n + j] += row[i] as f64 * row[j] as f64;
                }
            }
        }
        h
    }

    /// `||X Wᵀ - X Ŵᵀ||²` over the rows of `x`.
    fn output_error(x: &[f32], w: &[f32], w_hat: &[f32], n: usize) -> f64 {
        let diff: Vec<f64> = w
            .iter()
            .zip(w_hat)
            .map(|(a, b)| *a as f64 - *b as f64)
            .collect();
        x.chunks(n)
            .map(|x| {
                diff.chunks(n)
                    .map(|d| {
                        d.iter()
                            .zip(x)
                            .map(|(d, x)| d * *x as f64)
                            .sum::<f64>()
                            .powi(2)
                    })
                    .sum::<f64>()
            })
            .sum()
    }

    #[test]
    fn never_worse_than_nearest_on_the_calibration_outputs() {
        let id = TensorId::layer(TensorKind::WIn, 0);
        for seed in 0..6 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let (rows, n) = (12, 70);
            let w: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let x = inputs(400, n, &mut rng);
            let solver = Solver::new(&second_moment(&x, n), n, DAMPING).unwrap();
            for dtype in [DType::I8, DType::I4] {
                let g = decode_matrix(
                    &encode_matrix(id, [rows, n], &w, dtype, &solver, &I8_CLIPS).unwrap(),
                );
                let r = decode_matrix(&nearest(id, [rows, n], &w, dtype).unwrap());
                let (eg, er) = (
                    output_error(&x, &w, &g.unwrap(), n),
                    output_error(&x, &w, &r.unwrap(), n),
                );
                assert!(eg < er, "seed {seed} {dtype:?}: gptq {eg} nearest {er}");
            }
        }
    }

    #[test]
    fn identity_hessian_is_nearest_rounding() {
        let id = TensorId::layer(TensorKind::WO, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (rows, n) = (5, 77);
        let w: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-3.0..3.0)).collect();
        for dtype in [DType::I8, DType::I4] {
            let g = encode_matrix(id, [rows, n], &w, dtype, &Solver::identity(n), &[1.0]).unwrap();
            assert_eq!(g, nearest(id, [rows, n], &w, dtype).unwrap(), "{dtype:?}");
        }
    }

    #[test]
    fn values_stay_in_range_and_bad_input_is_refused() {
        let id = TensorId::global(TensorKind::WU);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n = 40;
        let x = inputs(100, n, &mut rng);
        let solver = Solver::new(&second_moment(&x, n), n, DAMPING).unwrap();
        let w: Vec<f32> = (0..4 * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let t = encode_matrix(id, [4, n], &w, DType::I8, &solver, &I8_CLIPS).unwrap();
        assert!(t.data.iter().all(|&b| b as i8 >= -127));
        let t = encode_matrix(id, [4, n], &w, DType::I4, &solver, &I8_CLIPS).unwrap();
        assert!(t.data.iter().all(|&b| (b & 0x0f) != 8 && (b >> 4) != 8));
        assert!(encode_matrix(id, [4, n], &w, DType::F16, &solver, &I8_CLIPS).is_err());
        assert!(encode_matrix(id, [4, n + 1], &w, DType::I8, &solver, &I8_CLIPS).is_err());
        assert!(Solver::new(&[f64::NAN; 4], 2, DAMPING).is_err());
        assert!(Solver::new(&[1.0; 3], 2, DAMPING).is_err());
    }
}
