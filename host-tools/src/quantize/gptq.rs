//! GPTQ (Frantar et al. 2022): error-compensating rounding of one matrix `W` (`[outputs][inputs]`)
//! given the second moment `H = E[x xᵀ]` of its inputs. The inputs are quantised one column at a time,
//! and each column's rounding error is pushed onto the columns not yet quantised so that `W x` over the
//! calibration inputs moves as little as possible. The values fill exactly the blob layout the nearest
//! rounding of [`super::encode_matrix`] fills (int8: one scale per row, fixed before the row is
//! quantised; int4: one scale per group of 32 inputs, chosen when the group is reached; f16: each value
//! to its nearest `f16`, the grid being the format's own), with the core's own rounding and
//! `f16`-rounded-up scales, so the device maths is unchanged.

use anyhow::{anyhow, ensure, Result};
use microlens::blob::{TensorData, I4_GROUP};
use microlens::quant::activations::quantize_one;
use microlens::quant::encode::{weight_scale, I4_MAX};
use microlens::{DType, TensorId};
use nalgebra::DMatrix;

/// Damping added to the diagonal of `H` before inverting it, as a fraction of its mean diagonal.
pub const DAMPING: f64 = 0.01;

/// Clipping factors tried for an int4 group scale (`max|w_g| * f / 7`).
pub const I4_CLIPS: [f32; 6] = [1.0, 0.95, 0.9, 0.85, 0.8, 0.75];

/// What GPTQ needs of one input space: the order the inputs are quantised in and the upper Cholesky
/// factor `U` of the damped `H⁻¹` (in that order), whose rows carry the error feedback.
#[derive(Clone, Debug)]
pub struct Solver {
    n: usize,
    /// `order[k]` is the input quantised `k`-th: `0..n`, or by decreasing `H_ii` ("act order").
    order: Vec<usize>,
    u: DMatrix<f64>,
}

impl Solver {
    /// The solver for second moment `h` (`n x n`, row-major, symmetric positive semi-definite). An
    /// input that is always 0 (zero diagonal) is decoupled from the others and rounded to nearest.
    /// `act_order` quantises the inputs by decreasing `H_ii` instead of in order (for int8 only: int4
    /// groups are runs of 32 inputs in order).
    pub fn new(h: &[f64], n: usize, damping: f64, act_order: bool) -> Result<Solver> {
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
        let mut order: Vec<usize> = (0..n).collect();
        if act_order {
            order.sort_by(|&a, &b| h[(b, b)].total_cmp(&h[(a, a)]).then(a.cmp(&b)));
        }
        let mut damped = DMatrix::from_fn(n, n, |i, j| h[(order[i], order[j])]);
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
        Ok(Solver { n, order, u })
    }

    /// The identity solver: no feedback, so GPTQ is exactly nearest rounding.
    pub fn identity(n: usize) -> Solver {
        Solver {
            n,
            order: (0..n).collect(),
            u: DMatrix::identity(n, n),
        }
    }

    /// Inputs.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Whether the inputs are quantised in order.
    pub fn in_order(&self) -> bool {
        self.order.iter().enumerate().all(|(k, &c)| k == c)
    }

    /// Quantises one row: the integers (int8 range, or int4 range for `I4`) and the scales (one for
    /// `I8`, `max|w| / 127` of the row as given; one per group of 32 for `I4`, chosen when the group is
    /// reached among `max|w_g| * f / 7` of the group as updated, for `f` in `clips`, as the one that adds
    /// least to the GPTQ loss), or `None` if a scale is out of the `f16` range.
    fn row(&self, w: &[f32], dtype: DType, clips: &[f32]) -> Option<(Vec<i8>, Vec<f32>)> {
        let n = self.n;
        let mut work: Vec<f64> = self.order.iter().map(|&c| w[c] as f64).collect();
        let mut q = vec![0i8; n];
        let mut scales = Vec::new();
        let (segment, q_max) = match dtype {
            DType::I4 => (I4_GROUP, I4_MAX),
            _ => (n.max(1), 127.0),
        };
        let clips = if dtype == DType::I4 { clips } else { &[1.0] };
        for start in (0..n).step_by(segment) {
            let end = (start + segment).min(n);
            let group: Vec<f32> = work[start..end].iter().map(|&v| v as f32).collect();
            let mut best: Option<(f64, f32, Vec<f64>, Vec<i8>)> = None;
            for &clip in clips {
                let scale = weight_scale(&group, q_max / clip)?;
                let mut trial = work.clone();
                let mut tq = vec![0i8; end - start];
                let loss = self.columns(&mut trial, start..end, scale, q_max, &mut tq);
                if best.as_ref().is_none_or(|b| loss < b.0) {
                    best = Some((loss, scale, trial, tq));
                }
            }
            let (_, scale, trial, tq) = best?;
            work = trial;
            for (k, v) in (start..end).zip(tq) {
                q[self.order[k]] = v;
            }
            scales.push(scale);
        }
        Some((q, scales))
    }

    /// Rounds one row to `f16`, in the solver's order, each value to its nearest `f16` after the
    /// feedback of the columns before it; `None` if a value leaves the `f16` range.
    fn row_f16(&self, w: &[f32]) -> Option<Vec<half::f16>> {
        let mut work: Vec<f64> = self.order.iter().map(|&c| w[c] as f64).collect();
        let mut out = vec![half::f16::ZERO; self.n];
        for c in 0..self.n {
            let x = work[c];
            let q = half::f16::from_f64(x);
            if !q.is_finite() {
                return None;
            }
            out[self.order[c]] = q;
            self.feed_back(&mut work, c, (x - q.to_f64()) / self.u[(c, c)]);
        }
        Some(out)
    }

    /// Pushes column `c`'s scaled rounding error `err` onto the columns after it.
    fn feed_back(&self, work: &mut [f64], c: usize, err: f64) {
        let feedback = self.u.row(c);
        for (j, w) in work.iter_mut().enumerate().skip(c + 1) {
            *w -= err * feedback[j];
        }
    }

    /// Quantises columns `cols` of `work` with one `scale`, writing the integers into `q` and pushing
    /// each column's error onto the later columns; returns the GPTQ loss they add,
    /// `sum ((w_c - q_c s) / U_cc)²`.
    fn columns(
        &self,
        work: &mut [f64],
        cols: std::ops::Range<usize>,
        scale: f32,
        q_max: f32,
        q: &mut [i8],
    ) -> f64 {
        let limit = q_max as i8;
        let mut loss = 0.0;
        for (c, qc) in cols.zip(q) {
            let x = work[c];
            *qc = quantize_one(x as f32, scale).clamp(-limit, limit);
            let err = (x - *qc as f64 * scale as f64) / self.u[(c, c)];
            loss += err * err;
            self.feed_back(work, c, err);
        }
        loss
    }
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
/// against `solver` (for `cols` inputs).
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
        matches!(dtype, DType::F16 | DType::I8 | DType::I4),
        "GPTQ rounds to f16, i8 or i4, not {}",
        dtype.name()
    );
    super::check_values(id, shape, values)?;
    ensure!(
        solver.n() == cols,
        "tensor {id}: a {}-input Hessian for shape {shape:?}",
        solver.n()
    );
    ensure!(
        dtype != DType::I4 || solver.in_order(),
        "tensor {id}: int4 groups need the inputs quantised in order"
    );
    if dtype == DType::F16 {
        let mut data = Vec::with_capacity(2 * values.len());
        for row in values.chunks(cols.max(1)) {
            let q = solver
                .row_f16(row)
                .ok_or_else(|| anyhow!("tensor {id} has a value beyond the f16 range"))?;
            data.extend(q.iter().flat_map(|v| v.to_le_bytes()));
        }
        return Ok(TensorData {
            id,
            dtype,
            shape,
            data,
            scales: Vec::new(),
        });
    }
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
        let (q, s) = solver.row(row, dtype, clips).ok_or_else(|| {
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
            let h = second_moment(&x, n);
            for (dtype, act_order) in [
                (DType::I8, false),
                (DType::I8, true),
                (DType::I4, false),
                (DType::F16, true),
            ] {
                let solver = Solver::new(&h, n, DAMPING, act_order).unwrap();
                let g = decode_matrix(
                    &encode_matrix(id, [rows, n], &w, dtype, &solver, &I4_CLIPS).unwrap(),
                );
                let r = decode_matrix(&nearest(id, [rows, n], &w, dtype).unwrap());
                let (eg, er) = (
                    output_error(&x, &w, &g.unwrap(), n),
                    output_error(&x, &w, &r.unwrap(), n),
                );
                assert!(
                    eg < er,
                    "seed {seed} {dtype:?} {act_order}: gptq {eg} nearest {er}"
                );
            }
        }
    }

    #[test]
    fn identity_hessian_is_nearest_rounding() {
        let id = TensorId::layer(TensorKind::WO, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (rows, n) = (5, 77);
        let w: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-3.0..3.0)).collect();
        for dtype in [DType::F16, DType::I8, DType::I4] {
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
        let solver = Solver::new(&second_moment(&x, n), n, DAMPING, false).unwrap();
        let w: Vec<f32> = (0..4 * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let t = encode_matrix(id, [4, n], &w, DType::I8, &solver, &I4_CLIPS).unwrap();
        assert!(t.data.iter().all(|&b| b as i8 >= -127));
        let t = encode_matrix(id, [4, n], &w, DType::I4, &solver, &I4_CLIPS).unwrap();
        assert!(t.data.iter().all(|&b| (b & 0x0f) != 8 && (b >> 4) != 8));
        assert!(encode_matrix(id, [4, n], &w, DType::F32, &solver, &I4_CLIPS).is_err());
        let mut big = w.clone();
        big[1] = 7e4;
        assert!(encode_matrix(id, [4, n], &big, DType::F16, &solver, &I4_CLIPS).is_err());
        let reordered = Solver::new(&second_moment(&x, n), n, DAMPING, true).unwrap();
        assert!(!reordered.in_order());
        assert!(encode_matrix(id, [4, n], &w, DType::I4, &reordered, &I4_CLIPS).is_err());
        let t = encode_matrix(id, [4, n], &w, DType::I8, &reordered, &I4_CLIPS).unwrap();
        assert!(t.data.iter().all(|&b| b as i8 >= -127));
        assert!(encode_matrix(id, [4, n + 1], &w, DType::I8, &solver, &I4_CLIPS).is_err());
        assert!(Solver::new(&[f64::NAN; 4], 2, DAMPING, false).is_err());
        assert!(Solver::new(&[1.0; 3], 2, DAMPING, false).is_err());
    }
}
