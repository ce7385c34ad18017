//! The GPTQ solver of one input space: the damped second moment `H`, the Cholesky factor `U` of its
//! inverse that carries each column's rounding error onto the later columns, and column-by-column
//! rounding with that feedback (plain GPTQ).

use anyhow::{anyhow, ensure, Result};
use microlens::encode::quantize_one;
use microlens::encode::weight_scale;
use nalgebra::{DMatrix, DVector};

/// What GPTQ needs of one input space: the order the inputs are quantised in and the upper Cholesky
/// factor `U` of the damped `H⁻¹` (in that order), whose rows carry the error feedback.
#[derive(Clone, Debug)]
pub struct Solver {
    pub(super) n: usize,
    /// `order[k]` is the input quantised `k`-th: `0..n`, or by decreasing `H_ii` ("act order").
    pub(super) order: Vec<usize>,
    pub(super) u: DMatrix<f64>,
    /// The damped `H` (in the solver's order), the loss [`Solver::refine`] descends.
    pub(super) h: DMatrix<f64>,
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
        let inverse = damped.clone().cholesky().ok_or_else(not_pd)?.inverse();
        let u = inverse.cholesky().ok_or_else(not_pd)?.l().transpose();
        Ok(Solver {
            n,
            order,
            u,
            h: damped,
        })
    }

    /// The identity solver: no feedback, so GPTQ is exactly nearest rounding (int4 rows are then
    /// refined on `|w - ŵ|²`).
    pub fn identity(n: usize) -> Solver {
        Solver {
            n,
            order: (0..n).collect(),
            u: DMatrix::identity(n, n),
            h: DMatrix::identity(n, n),
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

    /// GPTQ of `target` (in the solver's order) to integers in `-q_max..=q_max` (in that order), with
    /// one scale per `segment` inputs, chosen when the segment is reached among `max|w_g| * f / q_max`
    /// of the segment as updated, for `f` in `clips`, as the one that adds least to the loss; without
    /// `feedback`, nearest rounding.
    pub(super) fn gptq(
        &self,
        target: &[f64],
        segment: usize,
        q_max: f32,
        clips: &[f32],
        feedback: bool,
    ) -> Option<(Vec<i8>, Vec<f32>)> {
        let n = self.n;
        let mut work = target.to_vec();
        let mut q = vec![0i8; n];
        let mut scales = Vec::new();
        for start in (0..n).step_by(segment) {
            let end = (start + segment).min(n);
            let group: Vec<f32> = work[start..end].iter().map(|&v| v as f32).collect();
            let mut best: Option<(f64, f32, Vec<f64>, Vec<i8>)> = None;
            for &clip in clips {
                let scale = weight_scale(&group, q_max / clip)?;
                let mut trial = work.clone();
                let mut tq = vec![0i8; end - start];
                let loss = self.columns(&mut trial, start..end, scale, q_max, &mut tq, feedback);
                if best.as_ref().is_none_or(|b| loss < b.0) {
                    best = Some((loss, scale, trial, tq));
                }
            }
            let (_, scale, trial, tq) = best?;
            work = trial;
            q[start..end].copy_from_slice(&tq);
            scales.push(scale);
        }
        Some((q, scales))
    }

    /// The loss GPTQ minimises, `(w - ŵ)ᵀ H (w - ŵ)` with the damped `H`, of integers `q` with one of
    /// `scales` per `segment` inputs (`w` and `q` in the solver's order).
    pub(super) fn loss(&self, w: &[f64], q: &[i8], scales: &[f32], segment: usize) -> f64 {
        let r = residual(w, q, scales, segment);
        (&self.h * &r).dot(&r)
    }

    /// Pushes column `c`'s scaled rounding error `err` onto the columns after it.
    pub(super) fn feed_back(&self, work: &mut [f64], c: usize, err: f64) {
        let feedback = self.u.row(c);
        for (j, w) in work.iter_mut().enumerate().skip(c + 1) {
            *w -= err * feedback[j];
        }
    }

    /// Quantises columns `cols` of `work` with one `scale`, writing the integers into `q` and (with
    /// `feedback`) pushing each column's error onto the later columns; returns the GPTQ loss they add,
    /// `sum ((w_c - q_c s) / U_cc)²`.
    pub(super) fn columns(
        &self,
        work: &mut [f64],
        cols: std::ops::Range<usize>,
        scale: f32,
        q_max: f32,
        q: &mut [i8],
        feedback: bool,
    ) -> f64 {
        let limit = q_max as i8;
        let mut loss = 0.0;
        for (c, qc) in cols.zip(q) {
            *qc = quantize_one(work[c] as f32, scale).clamp(-limit, limit);
            let err = self.error(work, c, *qc, scale);
            loss += err * err;
            if feedback {
                self.feed_back(work, c, err);
            }
        }
        loss
    }

    /// Column `c`'s scaled rounding error at integer `v` with `scale`, `(w_c - v s) / U_cc`.
    pub(super) fn error(&self, work: &[f64], c: usize, v: i8, scale: f32) -> f64 {
        (work[c] - v as f64 * scale as f64) / self.u[(c, c)]
    }
}

/// `w - ŵ` for integers `q` with one scale per `segment` inputs.
pub(super) fn residual(w: &[f64], q: &[i8], scales: &[f32], segment: usize) -> DVector<f64> {
    DVector::from_iterator(
        w.len(),
        w.iter()
            .zip(q)
            .enumerate()
            .map(|(i, (w, &q))| w - q as f64 * scales[i / segment] as f64),
    )
}
