//! GPTQ (Frantar et al. 2022): error-compensating rounding of one matrix `W` (`[outputs][inputs]`)
//! given the second moment `H = E[x xᵀ]` of its inputs. The inputs are quantised one column at a time,
//! and each column's rounding error is pushed onto the columns not yet quantised so that `W x` over the
//! calibration inputs moves as little as possible. The values fill exactly the blob layout the nearest
//! rounding of [`super::encode_nearest`] fills (int8: one scale per row, fixed before the row is
//! quantised; int4: one scale per group of 32 inputs, chosen when the group is reached, then the
//! integers and scales refined by coordinate descent on the same loss; f16: each value to its nearest
//! `f16`, the grid being the format's own), with the core's own rounding and `f16` scales, so the
//! device maths is unchanged. Integer rows then have their integers searched exactly, block by block
//! ([`search`]): GPTQ's nearest integer per column is one path of that search.

use anyhow::{anyhow, ensure, Result};
use microlens::blob::{TensorData, I4_GROUP, I8_GROUP};
use microlens::encode::{self, I4_MAX};
use microlens::{DType, TensorId};
use rayon::prelude::*;

mod f16;
mod refine;
pub mod search;
mod solver;

pub use solver::Solver;

use search::{Budget, SEARCH_ROUNDS};

/// Damping added to the diagonal of `H` before inverting it, as a fraction of its mean diagonal.
pub const DAMPING: f64 = 0.01;

/// Clipping factors tried for an int4 group scale (`max|w_g| * f / 7`).
pub const I4_CLIPS: [f32; 11] = [
    1.0, 0.975, 0.95, 0.925, 0.9, 0.875, 0.85, 0.825, 0.8, 0.775, 0.75,
];

impl Solver {
    /// Quantises one row: the integers (int8 range, or int4 range for `I4`) and the scales (one for
    /// `I8`, `max|w| / 127` of the row as given; one per group of 32 for `I4`, of 8 for `I8G`, each
    /// chosen when its group is reached and then refined), or `None` if a scale is
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
                if !self.search(&target, &mut q, &scales, I4_GROUP, Budget::INT4) {
                    break;
                }
                self.refine(&target, &mut q, &mut scales, I4_GROUP, I4_MAX as i8);
            }
            (q, scales)
        } else if dtype == DType::I8G {
            // Each group's scale `max|w_g| / 127` when the group is reached; then the integers and
            // scales refined, searched, and refined again.
            let (mut q, mut scales) = self.gptq(&target, I8_GROUP, 127.0, &[1.0], true)?;
            self.refine(&target, &mut q, &mut scales, I8_GROUP, 127);
            if self.search(&target, &mut q, &scales, I8_GROUP, Budget::INT8) {
                self.refine(&target, &mut q, &mut scales, I8_GROUP, 127);
            }
            (q, scales)
        } else {
            let (mut q, scales) = self.gptq(&target, n.max(1), 127.0, &[1.0], true)?;
            self.search(&target, &mut q, &scales, n.max(1), Budget::INT8);
            (q, scales)
        };
        let mut out = vec![0i8; n];
        for (k, v) in q.into_iter().enumerate() {
            out[self.order[k]] = v;
        }
        Some((out, scales))
    }
}

/// Whether `dtype` has a scale per group of inputs (`i4`, `i8g`), which GPTQ must reach in order.
pub fn grouped(dtype: DType) -> bool {
    matches!(dtype, DType::I4 | DType::I8G)
}

/// Packs a row's integers as the blob stores them: one byte each for `I8`, two per byte (the core's
/// [`encode::pack_i4`]) for `I4`.
fn pack_row(q: &[i8], dtype: DType, out: &mut [u8]) {
    match dtype {
        DType::I4 => encode::pack_i4(q, out),
        _ => out.iter_mut().zip(q).for_each(|(o, &v)| *o = v as u8),
    }
}

/// Refuses what GPTQ cannot round: another `dtype` than `f16`, `i8`, `i4` or `i8g`, `values` that do
/// not fill `shape` or are not finite, a `solver` for another number of inputs, or groups out of order.
fn check(
    id: TensorId,
    shape: [usize; 2],
    values: &[f32],
    dtype: DType,
    solver: &Solver,
) -> Result<()> {
    ensure!(
        matches!(dtype, DType::F16 | DType::I8 | DType::I4 | DType::I8G),
        "GPTQ rounds to f16, i8, i4 or i8g, not {}",
        dtype.name()
    );
    crate::quantize::encode::check_values(id, shape, values)?;
    ensure!(
        solver.n() == shape[1],
        "tensor {id}: a {}-input Hessian for shape {shape:?}",
        solver.n()
    );
    ensure!(
        !grouped(dtype) || solver.in_order(),
        "tensor {id}: {} groups need the inputs quantised in order",
        dtype.name()
    );
    Ok(())
}

/// Encodes a `[rows, cols]` matrix of row-major `values` as `dtype` (`I8` or `I4`) with GPTQ rounding
/// against `solver` (for `cols` inputs).
pub fn encode_gptq(
    id: TensorId,
    shape: [usize; 2],
    values: &[f32],
    dtype: DType,
    solver: &Solver,
    clips: &[f32],
) -> Result<TensorData> {
    let cols = shape[1];
    check(id, shape, values, dtype, solver)?;
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
    // Rows are independent (each its own search against the shared Hessian): in parallel, then
    // packed in row order, so the blob does not depend on the thread count.
    let solved: Vec<_> = values
        .par_chunks(cols.max(1))
        .map(|row| solver.row(row, dtype, clips))
        .collect();
    packed(id, shape, dtype, solved)
}

/// The tensor of rounded rows (integers and scales, in row order; `None` where a scale is out of the
/// `f16` range: an error).
fn packed(
    id: TensorId,
    shape: [usize; 2],
    dtype: DType,
    solved: Vec<Option<(Vec<i8>, Vec<f32>)>>,
) -> Result<TensorData> {
    let [rows, cols] = shape;
    let row_bytes = dtype.row_bytes(cols).unwrap_or(0);
    let mut data = vec![0u8; rows * row_bytes];
    let mut scales = Vec::new();
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

/// [`encode_gptq`] with the rows coupled through `outputs`, the solver of the second moment `F` of the
/// matrix's outputs' effect (`[rows][rows]`): the loss is `tr(F ΔW H ΔWᵀ)`, and it is GPTQ on both
/// sides. The rows are rounded one at a time in `outputs`' order, each against `solver` as
/// [`encode_gptq`] rounds it, and each row's error `δ = w - ŵ` moves the rows not yet rounded by
/// `-δ U_kj / U_kk` (`U` the Cholesky factor of `F⁻¹`): the least-squares best continuous reply
/// of the other rows, whatever `H` is. `f16` rows are rounded as [`encode_gptq`] does.
pub fn encode_gptq_rows(
    id: TensorId,
    shape: [usize; 2],
    values: &[f32],
    dtype: DType,
    solver: &Solver,
    outputs: &Solver,
    clips: &[f32],
) -> Result<TensorData> {
    let [rows, cols] = shape;
    if dtype == DType::F16 {
        return encode_gptq(id, shape, values, dtype, solver, clips);
    }
    ensure!(
        outputs.n() == rows,
        "tensor {id}: a {}-output moment for shape {shape:?}",
        outputs.n()
    );
    check(id, shape, values, dtype, solver)?;
    let mut work: Vec<Vec<f64>> = values
        .chunks(cols.max(1))
        .map(|r| r.iter().map(|&v| v as f64).collect())
        .collect();
    let mut solved: Vec<Option<(Vec<i8>, Vec<f32>)>> = vec![None; rows];
    let segment = dtype.group(cols).max(1);
    for k in 0..rows {
        let r = outputs.order[k];
        let row: Vec<f32> = work[r].iter().map(|&v| v as f32).collect();
        let (q, s) = solver.row(&row, dtype, clips).ok_or_else(|| {
            anyhow!(
                "tensor {id} has a value beyond the {} scale range",
                dtype.name()
            )
        })?;
        let delta: Vec<f64> = (0..cols)
            .map(|c| work[r][c] - q[c] as f64 * s[c / segment] as f64)
            .collect();
        let ukk = outputs.u[(k, k)];
        for j in k + 1..rows {
            let f = outputs.u[(k, j)] / ukk;
            let target = &mut work[outputs.order[j]];
            target.iter_mut().zip(&delta).for_each(|(w, d)| *w -= f * d);
        }
        solved[r] = Some((q, s));
    }
    packed(id, shape, dtype, solved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantize::{decode_matrix, encode_nearest as nearest};
    use microlens::TensorKind;
    use nalgebra::DVector;
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
                    &encode_gptq(id, [rows, n], &w, dtype, &solver, &I4_CLIPS).unwrap(),
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

    /// `tr(F ΔW H ΔWᵀ)` of `w_hat` against `w` (`[rows][n]`).
    fn kronecker_loss(f: &[f64], h: &[f64], w: &[f32], w_hat: &[f32], n: usize) -> f64 {
        let rows = w.len() / n;
        let d =
            nalgebra::DMatrix::from_fn(rows, n, |r, c| (w[r * n + c] - w_hat[r * n + c]) as f64);
        let f = nalgebra::DMatrix::from_row_slice(rows, rows, f);
        let h = nalgebra::DMatrix::from_row_slice(n, n, h);
        (f * &d * h * d.transpose()).trace()
    }

    #[test]
    fn coupled_rows_lower_the_output_weighted_loss() {
        let id = TensorId::layer(TensorKind::WQ, 0);
        let (mut lower, mut total_rows, mut total_plain) = (0, 0.0, 0.0);
        for seed in 0..6 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let (rows, n) = (16, 24);
            let w: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let h = second_moment(&inputs(300, n, &mut rng), n);
            let f = second_moment(&inputs(300, rows, &mut rng), rows);
            let solver = Solver::new(&h, n, DAMPING, true).unwrap();
            let outputs = Solver::new(&f, rows, DAMPING, true).unwrap();
            for dtype in [DType::I8, DType::I4] {
                let solver = match dtype {
                    DType::I4 => Solver::new(&h, n, DAMPING, false).unwrap(),
                    _ => solver.clone(),
                };
                let coupled =
                    encode_gptq_rows(id, [rows, n], &w, dtype, &solver, &outputs, &I4_CLIPS)
                        .unwrap();
                let plain = encode_gptq(id, [rows, n], &w, dtype, &solver, &I4_CLIPS).unwrap();
                let loss =
                    |t: &TensorData| kronecker_loss(&f, &h, &w, &decode_matrix(t).unwrap(), n);
                let (c, p) = (loss(&coupled), loss(&plain));
                lower += usize::from(c < p);
                if dtype == DType::I8 {
                    total_rows += c;
                    total_plain += p;
                }
            }
        }
        assert!(lower >= 10, "{lower} of 12 lower");
        assert!(
            total_rows < 0.9 * total_plain,
            "{total_rows} vs {total_plain}"
        );
    }

    #[test]
    fn uncoupled_outputs_round_as_plain_gptq() {
        let id = TensorId::layer(TensorKind::WIn, 0);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let (rows, n) = (6, 20);
        let w: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let solver = Solver::new(
            &second_moment(&inputs(100, n, &mut rng), n),
            n,
            DAMPING,
            true,
        )
        .unwrap();
        let diagonal: Vec<f64> = (0..rows * rows)
            .map(|i| {
                if i % (rows + 1) == 0 {
                    1.0 + (i % 5) as f64
                } else {
                    0.0
                }
            })
            .collect();
        let outputs = Solver::new(&diagonal, rows, DAMPING, true).unwrap();
        for dtype in [DType::I8, DType::I4, DType::F16] {
            let solver = match dtype {
                DType::I4 => Solver::identity(n),
                _ => solver.clone(),
            };
            let coupled =
                encode_gptq_rows(id, [rows, n], &w, dtype, &solver, &outputs, &I4_CLIPS).unwrap();
            let plain = encode_gptq(id, [rows, n], &w, dtype, &solver, &I4_CLIPS).unwrap();
            assert_eq!(coupled, plain, "{dtype:?}");
        }
        let wrong = Solver::identity(rows + 1);
        assert!(encode_gptq_rows(id, [rows, n], &w, DType::I8, &solver, &wrong, &[1.0]).is_err());
    }

    #[test]
    fn identity_hessian_is_nearest_rounding_which_int4_refines() {
        let id = TensorId::layer(TensorKind::WO, 1);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (rows, n) = (5, 77);
        let w: Vec<f32> = (0..rows * n).map(|_| rng.random_range(-3.0..3.0)).collect();
        for dtype in [DType::F16, DType::I8, DType::I4] {
            let g = encode_gptq(id, [rows, n], &w, dtype, &Solver::identity(n), &[1.0]).unwrap();
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
            let t = encode_gptq(id, [rows, n], &w, DType::I4, &solver, &I4_CLIPS).unwrap();
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
        let t = encode_gptq(id, [4, n], &w, DType::I8, &solver, &I4_CLIPS).unwrap();
        assert!(t.data.iter().all(|&b| b as i8 >= -127));
        let t = encode_gptq(id, [4, n], &w, DType::I4, &solver, &I4_CLIPS).unwrap();
        assert!(t.data.iter().all(|&b| (b & 0x0f) != 8 && (b >> 4) != 8));
        assert!(encode_gptq(id, [4, n], &w, DType::F32, &solver, &I4_CLIPS).is_err());
        let mut big = w.clone();
        big[1] = 7e4;
        assert!(encode_gptq(id, [4, n], &big, DType::F16, &solver, &I4_CLIPS).is_err());
        let reordered = Solver::new(&second_moment(&x, n), n, DAMPING, true).unwrap();
        assert!(!reordered.in_order());
        assert!(encode_gptq(id, [4, n], &w, DType::I4, &reordered, &I4_CLIPS).is_err());
        let t = encode_gptq(id, [4, n], &w, DType::I8, &reordered, &I4_CLIPS).unwrap();
        assert!(t.data.iter().all(|&b| b as i8 >= -127));
        assert!(encode_gptq(id, [4, n + 1], &w, DType::I8, &solver, &I4_CLIPS).is_err());
        assert!(Solver::new(&[f64::NAN; 4], 2, DAMPING, false).is_err());
        assert!(Solver::new(&[1.0; 3], 2, DAMPING, false).is_err());
    }
}
