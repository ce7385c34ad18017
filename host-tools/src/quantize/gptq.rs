//! GPTQ (Frantar et al. 2022): error-compensating rounding of one matrix `W` (`[outputs][inputs]`)
//! given the second moment `H = E[x xᵀ]` of its inputs. The inputs are quantised one column at a time,
//! and each column's rounding error is pushed onto the columns not yet quantised so that `W x` over the
//! calibration inputs moves as little as possible. The values fill exactly the blob layout the nearest
//! rounding of [`super::encode_matrix`] fills (int8: one scale per row, fixed before the row is
//! quantised; int4: one scale per group of 32 inputs, chosen when the group is reached, then the
//! integers and scales refined by coordinate descent on the same loss; f16: each value to its nearest
//! `f16`, the grid being the format's own), with the core's own rounding and `f16` scales, so the
//! device maths is unchanged. Integer rows then have their integers searched exactly, block by block
//! ([`search`]): GPTQ's nearest integer per column is one path of that search.

use anyhow::{anyhow, ensure, Result};
use microlens::blob::{scale_up, TensorData, I4_GROUP};
use microlens::quant::activations::quantize_one;
use microlens::quant::encode::{self, weight_scale, I4_MAX};
use microlens::{DType, TensorId};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

use super::search;

/// Damping added to the diagonal of `H` before inverting it, as a fraction of its mean diagonal.
pub const DAMPING: f64 = 0.01;

/// Clipping factors tried for an int4 group scale (`max|w_g| * f / 7`).
pub const I4_CLIPS: [f32; 11] = [
    1.0, 0.975, 0.95, 0.925, 0.9, 0.875, 0.85, 0.825, 0.8, 0.775, 0.75,
];

/// What GPTQ needs of one input space: the order the inputs are quantised in and the upper Cholesky
/// factor `U` of the damped `H⁻¹` (in that order), whose rows carry the error feedback.
#[derive(Clone, Debug)]
pub struct Solver {
    n: usize,
    /// `order[k]` is the input quantised `k`-th: `0..n`, or by decreasing `H_ii` ("act order").
    order: Vec<usize>,
    u: DMatrix<f64>,
    /// The damped `H` (in the solver's order), the loss [`Solver::refine`] descends.
    h: DMatrix<f64>,
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

    /// Quantises one row: the integers (int8 range, or int4 range for `I4`) and the scales (one for
    /// `I8`, `max|w| / 127` of the row as given; one per group of 32 for `I4`), or `None` if a scale is
    /// out of the `f16` range. An `I4` row is rounded from several starts (GPTQ with each group's clip
    /// chosen among `clips` when the group is reached, GPTQ with each clip for every group, and nearest
    /// rounding with each clip), each start is [refined](Solver::refine), and the one with the least
    /// loss is kept.
    fn row(&self, w: &[f32], dtype: DType, clips: &[f32]) -> Option<(Vec<i8>, Vec<f32>)> {
        let n = self.n;
        let target: Vec<f64> = self.order.iter().map(|&c| w[c] as f64).collect();
        let (q, scales) = if dtype == DType::I4 {
            let singles = clips.chunks(1).filter(|_| clips.len() > 1);
            let starts = std::iter::once(clips).chain(singles).map(|c| (c, true));
            let nearest = clips.chunks(1).map(|c| (c, false));
            let mut best: Option<(f64, Vec<i8>, Vec<f32>)> = None;
            for (clips, feedback) in starts.chain(nearest) {
                let (mut q, mut scales) = self.gptq(&target, I4_GROUP, I4_MAX, clips, feedback)?;
                self.refine(&target, &mut q, &mut scales, I4_GROUP, I4_MAX as i8);
                let loss = self.loss(&target, &q, &scales, I4_GROUP);
                if best.as_ref().is_none_or(|b| loss < b.0) {
                    best = Some((loss, q, scales));
                }
            }
            let (_, mut q, mut scales) = best?;
            for _ in 0..SEARCH_ROUNDS {
                if !self.search(&target, &mut q, &scales, I4_GROUP, I4_MAX as i8) {
                    break;
                }
                self.refine(&target, &mut q, &mut scales, I4_GROUP, I4_MAX as i8);
            }
            (q, scales)
        } else {
            let (mut q, scales) = self.gptq(&target, n.max(1), 127.0, &[1.0], true)?;
            self.search(&target, &mut q, &scales, n.max(1), 127);
            (q, scales)
        };
        let mut out = vec![0i8; n];
        for (k, v) in q.into_iter().enumerate() {
            out[self.order[k]] = v;
        }
        Some((out, scales))
    }

    /// GPTQ of `target` (in the solver's order) to integers in `-q_max..=q_max` (in that order), with
    /// one scale per `segment` inputs, chosen when the segment is reached among `max|w_g| * f / q_max`
    /// of the segment as updated, for `f` in `clips`, as the one that adds least to the loss; without
    /// `feedback`, nearest rounding.
    fn gptq(
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
    fn loss(&self, w: &[f64], q: &[i8], scales: &[f32], segment: usize) -> f64 {
        let r = residual(w, q, scales, segment);
        (&self.h * &r).dot(&r)
    }

    /// Lowers [the loss](Solver::loss) of a rounded row by coordinate descent, never raising it: moves
    /// of one integer by ±1 (within `-limit..=limit`) while one helps, then each segment's scale (its
    /// integers kept) to the better `f16` either side of its least-squares optimum, and again while a
    /// scale moved. `g = H (w - ŵ)` is kept up to date: moving `ŵ_i` by `d` changes the loss by
    /// `d² H_ii - 2 d g_i`.
    fn refine(&self, w: &[f64], q: &mut [i8], scales: &mut [f32], segment: usize, limit: i8) {
        let (n, h) = (self.n, &self.h);
        let limit = limit as i16;
        let mut g = h * residual(w, q, scales, segment);
        for _ in 0..REFINE_ROUNDS {
            for _ in 0..REFINE_PASSES {
                let mut moved = false;
                for i in 0..n {
                    let s = scales[i / segment] as f64;
                    for step in [1i16, -1] {
                        let (next, d) = (q[i] as i16 + step, step as f64 * s);
                        if next.abs() <= limit && d * d * h[(i, i)] - 2.0 * d * g[i] < 0.0 {
                            q[i] = next as i8;
                            g.axpy(-d, &h.column(i), 1.0);
                            moved = true;
                            break;
                        }
                    }
                }
                if !moved {
                    break;
                }
            }
            let mut rescaled = false;
            for (k, scale) in scales.iter_mut().enumerate() {
                let cols = k * segment..((k + 1) * segment).min(n);
                let mut hq = DVector::zeros(n);
                for c in cols.clone() {
                    hq.axpy(q[c] as f64, &h.column(c), 1.0);
                }
                // With `r` the residual without this segment, the loss is `rᵀHr - 2 s qᵀHr + s² qᵀHq`.
                let qhq: f64 = cols.clone().map(|c| q[c] as f64 * hq[c]).sum();
                let old = *scale as f64;
                let qhr = cols.map(|c| q[c] as f64 * g[c]).sum::<f64>() + old * qhq;
                let Some(up) = (qhq > 0.0).then(|| scale_up((qhr / qhq) as f32)).flatten() else {
                    continue;
                };
                let down = half::f16::from_bits(half::f16::from_f32(up).to_bits() - 1).to_f32();
                let change = |s: f64| (s * s - old * old) * qhq - 2.0 * (s - old) * qhr;
                let best = [up, down]
                    .into_iter()
                    .filter(|&s| s > 0.0)
                    .map(|s| (change(s as f64), s))
                    .min_by(|a, b| a.0.total_cmp(&b.0));
                if let Some((_, s)) = best.filter(|b| b.0 < 0.0) {
                    g.axpy(old - s as f64, &hq, 1.0);
                    *scale = s;
                    rescaled = true;
                }
            }
            if !rescaled {
                break;
            }
        }
    }

    /// Searches the integers of each block of at most [`SEARCH_WIDTH`] columns of a segment for the
    /// least loss ([`search::closest`]) with the columns before it as they are, keeping a block's new
    /// integers only where they lower the whole row's loss; returns whether any changed.
    fn search(&self, w: &[f64], q: &mut [i8], scales: &[f32], segment: usize, limit: i8) -> bool {
        let budget = search::Budget {
            limit,
            max_nodes: SEARCH_NODES,
        };
        let (mut work, mut changed) = (w.to_vec(), false);
        let mut loss = self.loss(w, q, scales, segment);
        for start in (0..self.n).step_by(SEARCH_WIDTH.min(segment)) {
            let cols = start..(start + SEARCH_WIDTH.min(segment)).min(self.n);
            let scale = scales[start / segment];
            let block = GroupFeedback { u: &self.u, start };
            let x = &work[cols.clone()];
            let (found, _) = search::closest(x, &block, scale as f64, &q[cols.clone()], budget);
            if found[..] != q[cols.clone()] {
                let mut next = q.to_vec();
                next[cols.clone()].copy_from_slice(&found);
                let next_loss = self.loss(w, &next, scales, segment);
                if next_loss < loss {
                    (loss, changed) = (next_loss, true);
                    q.copy_from_slice(&next);
                }
            }
            for c in cols {
                let err = self.error(&work, c, q[c], scale);
                self.feed_back(&mut work, c, err);
            }
        }
        changed
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

    /// Quantises columns `cols` of `work` with one `scale`, writing the integers into `q` and (with
    /// `feedback`) pushing each column's error onto the later columns; returns the GPTQ loss they add,
    /// `sum ((w_c - q_c s) / U_cc)²`.
    fn columns(
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
    fn error(&self, work: &[f64], c: usize, v: i8, scale: f32) -> f64 {
        (work[c] - v as f64 * scale as f64) / self.u[(c, c)]
    }
}

/// Search-tree nodes per block in [`Solver::search`], at most (25 times more moved the fixtures' mean
/// KL by -6% to +3%, the size of calibration noise).
const SEARCH_NODES: u64 = 200_000;
/// Columns searched together in [`Solver::search`], at most (a block's search keeps a table of
/// `width²` values and recurses `width` deep): an int4 group, or an int8 row of up to 64 inputs (the
/// fixtures' except `hf_gpt2`'s 128-input `W_out`, searched as two blocks).
const SEARCH_WIDTH: usize = 64;
/// Rounds of search then refinement of an int4 row, at most.
const SEARCH_ROUNDS: usize = 3;

/// The feedback rows of one block of columns, from column `start` of a solver's `U`.
struct GroupFeedback<'a> {
    u: &'a DMatrix<f64>,
    start: usize,
}

impl search::Feedback for GroupFeedback<'_> {
    fn u(&self, c: usize, j: usize) -> f64 {
        self.u[(self.start + c, self.start + j)]
    }
}

/// Coordinate passes over a row per round of [`Solver::refine`], at most.
const REFINE_PASSES: usize = 20;
/// Rounds of passes and rescaling in [`Solver::refine`], at most.
const REFINE_ROUNDS: usize = 5;

/// `w - ŵ` for integers `q` with one scale per `segment` inputs.
fn residual(w: &[f64], q: &[i8], scales: &[f32], segment: usize) -> DVector<f64> {
    DVector::from_iterator(
        w.len(),
        w.iter()
            .zip(q)
            .enumerate()
            .map(|(i, (w, &q))| w - q as f64 * scales[i / segment] as f64),
    )
}

/// Packs a row's integers as the blob stores them: one byte each for `I8`, two per byte (the core's
/// [`encode::pack_i4`]) for `I4`.
fn pack_row(q: &[i8], dtype: DType, out: &mut [u8]) {
    match dtype {
        DType::I4 => encode::pack_i4(q, out),
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
    let row_bytes = dtype.row_bytes(cols).unwrap_or(0);
    let mut data = vec![0u8; rows * row_bytes];
    let mut scales = Vec::new();
    // Rows are independent (each its own search against the shared Hessian): in parallel, then
    // packed in row order, so the blob does not depend on the thread count.
    let solved: Vec<_> = values
        .par_chunks(cols.max(1))
        .map(|row| solver.row(row, dtype, clips))
        .collect();
    for (solved, out) in solved.into_iter().zip(data.chunks_mut(row_bytes.max(1))) {
        let (q, s) = solved.ok_or_else(|| {
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
    fn identity_hessian_is_nearest_rounding_which_int4_refines() {
        let id = TensorId::layer(TensorKind::WO, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (rows, n) = (5, 77);
        let w: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-3.0..3.0)).collect();
        for dtype in [DType::F16, DType::I8, DType::I4] {
            let g = encode_matrix(id, [rows, n], &w, dtype, &Solver::identity(n), &[1.0]).unwrap();
            let r = nearest(id, [rows, n], &w, dtype).unwrap();
            if dtype != DType::I4 {
                assert_eq!(g, r, "{dtype:?}");
                continue;
            }
            // The int4 refinement only moves nearest rounding where that lowers `|w - ŵ|²`.
            let error = |t: &TensorData| {
                let v = decode_matrix(t).unwrap();
                w.iter()
                    .zip(v)
                    .map(|(a, b)| (*a as f64 - b as f64).powi(2))
                    .sum::<f64>()
            };
            assert!(error(&g) < error(&r), "{} vs {}", error(&g), error(&r));
        }
    }

    /// The int4 blob values have at most the GPTQ loss of plain GPTQ (every row), less in some rows, and
    /// the loss the refinement assumed.
    #[test]
    fn refinement_never_raises_the_gptq_loss() {
        let id = TensorId::layer(TensorKind::WOut, 0);
        let mut lowered = 0;
        for seed in 0..6 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let (rows, n) = (8, 70);
            let w: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let x = inputs(400, n, &mut rng);
            let solver = Solver::new(&second_moment(&x, n), n, DAMPING, false).unwrap();
            let t = encode_matrix(id, [rows, n], &w, DType::I4, &solver, &I4_CLIPS).unwrap();
            let decoded = decode_matrix(&t).unwrap();
            for (row, w_hat) in w.chunks(n).zip(decoded.chunks(n)) {
                let target: Vec<f64> = row.iter().map(|&v| v as f64).collect();
                let (q, scales) = solver
                    .gptq(&target, I4_GROUP, I4_MAX, &I4_CLIPS, true)
                    .unwrap();
                let plain = solver.loss(&target, &q, &scales, I4_GROUP);
                let r =
                    DVector::from_iterator(n, target.iter().zip(w_hat).map(|(a, b)| a - *b as f64));
                let blob = (&solver.h * &r).dot(&r);
                let (q, scales) = solver.row(row, DType::I4, &I4_CLIPS).unwrap();
                let assumed = solver.loss(&target, &q, &scales, I4_GROUP);
                assert!(
                    (blob - assumed).abs() <= 1e-9 * assumed,
                    "{blob} vs {assumed}"
                );
                assert!(blob <= plain, "seed {seed}: refined {blob} plain {plain}");
                lowered += usize::from(blob < 0.999 * plain);
            }
        }
        assert!(lowered > 0);
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
