//! GPTQ over a whole model. The lookup tables (`W_E`, `W_pos`, `pos_Q`, `pos_K`) are rounded
//! against the output Fisher ([`super::tables`]); the other matrices either each against the float
//! model's inputs (plain GPTQ, [`CalibrationInputs::Float`]) or, in forward order, with the errors
//! of what is already quantised compensated ([`CalibrationInputs::Quantized`]): each site's
//! matrices are rounded against the inputs the model produces with everything before them
//! quantised (and its int8 activations and KV cache), after moving their float weights to the ones
//! that best reproduce the float model's outputs from those inputs, and their biases take up the
//! mean of what is left. With `x`
//! the float model's inputs and `x̃` the quantised one's, centred (`x - E x`, `x̃ - E x̃`),
//! `W* = W + W E (H̃ + λI)⁻¹`, `E = E[(x - x̃) x̃ᵀ]`, `H̃ = E[x̃ x̃ᵀ]`, minimises `E|W x - W* x̃|²`
//! (up to the damping `λ`), and `E|W x - Ŵ x̃|² = E|W x - W* x̃|² + E|(W* - Ŵ) x̃|²`, so GPTQ of `W*`
//! against `H̃` minimises the whole error; the bias `b̂ = b + W E x - Ŵ E x̃` makes the uncentred
//! error's mean zero.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use anyhow::{anyhow, ensure, Context, Result};
use microlens::blob::{Activations, TensorData};
use microlens::tensors::Catalogue;
use microlens::weights::Matrix;
use microlens::{Config, DType, Model, TensorId, TensorKind};
use nalgebra::{DMatrix, DVector};

use super::calibration::{record, CalibrationInputs, InputPrecision, MatrixInput};
use super::gptq::{self, Solver};
use super::plan::Plan;
use super::{decode_matrix, encode_nearest, matrix_values, nearest_tensor, tables};

/// `rows` (`[count][n]`) as a matrix.
fn as_matrix(rows: &[f32], n: usize) -> DMatrix<f64> {
    // Read as the columns of the transpose (contiguous), then transposed.
    let count = rows.len() / n.max(1);
    DMatrix::from_iterator(n, count, rows[..count * n].iter().map(|&v| v as f64)).transpose()
}

/// A site's inputs as its matrices are rounded against them.
struct Compensation {
    /// `H̃`, the second moment of the quantised model's centred inputs.
    h: DMatrix<f64>,
    /// `E (H̃ + λI)⁻¹`, which moves `W` to `W*` (module docs).
    shift: DMatrix<f64>,
    /// The float model's mean input `E x`.
    mean: DVector<f64>,
    /// The quantised model's mean input `E x̃`.
    mean_q: DVector<f64>,
}

/// `rows` minus their mean row, and the mean row (as a column).
fn centred(rows: &DMatrix<f64>) -> (DMatrix<f64>, DVector<f64>) {
    let mean = rows.row_mean().transpose();
    let mut c = rows.clone();
    for (mut col, m) in c.column_iter_mut().zip(mean.iter()) {
        col.iter_mut().for_each(|v| *v -= m);
    }
    (c, mean)
}

/// How a site's matrices are rounded (module docs), from the float model's inputs `x` and the quantised
/// model's `xq` at the same tokens (`[tokens][n]`).
fn compensate(x: &DMatrix<f64>, xq: &DMatrix<f64>) -> Result<Compensation> {
    ensure!(
        x.shape() == xq.shape(),
        "the quantised model saw {} inputs where the float model saw {}",
        xq.nrows(),
        x.nrows()
    );
    let n = x.ncols();
    let count = xq.nrows().max(1) as f64;
    let ((x, mean), (xq, mean_q)) = (centred(x), centred(xq));
    let h = xq.transpose() * &xq / count;
    let e = (x - &xq).transpose() * &xq / count;
    let scale = h.diagonal().mean();
    ensure!(
        scale.is_finite(),
        "the calibration Hessian has a NaN or infinite value"
    );
    if scale <= 0.0 {
        // The inputs never vary (e.g. a LayerNorm over d_model = 1): nothing to compensate.
        return Ok(Compensation {
            shift: DMatrix::zeros(n, n),
            h,
            mean,
            mean_q,
        });
    }
    let mut damped = h.clone();
    for i in 0..n {
        damped[(i, i)] += gptq::DAMPING * scale;
    }
    let inverse = damped
        .try_inverse()
        .ok_or_else(|| anyhow!("the calibration Hessian is singular"))?;
    let shift = e * inverse;
    ensure!(
        shift.iter().all(|v| v.is_finite()),
        "the calibration Hessian is too ill-conditioned to invert (its inverse is not finite)"
    );
    Ok(Compensation {
        h,
        shift,
        mean,
        mean_q,
    })
}

/// The bias added to the output of matrix `id` in a model of `cfg` (a gated MLP adds `b_in` after
/// the gate's product, to no matrix's output).
pub fn bias_of(id: TensorId, cfg: &Config) -> Option<TensorId> {
    let kind = match id.kind {
        TensorKind::WQ => TensorKind::BQ,
        TensorKind::WK => TensorKind::BK,
        TensorKind::WV => TensorKind::BV,
        TensorKind::WO => TensorKind::BO,
        TensorKind::WIn if !cfg.gated_mlp => TensorKind::BIn,
        TensorKind::WOut => TensorKind::BOut,
        TensorKind::WU => TensorKind::BU,
        _ => return None,
    };
    Some(TensorId { kind, ..id })
}

/// The blob of `model` with the tensors in `done` quantised and the others `f32`.
fn partial_blob(
    model: &Model<'_>,
    activations: Activations,
    done: &BTreeMap<TensorKey, TensorData>,
) -> Result<Vec<u8>> {
    let cfg = model.config();
    let tensors: Vec<TensorData> = Catalogue::new(cfg)
        .ids()
        .map(|id| match done.get(&key(id)) {
            Some(t) => Ok(t.clone()),
            None => nearest_tensor(model, id, DType::F32),
        })
        .collect::<Result<_>>()?;
    let blob = microlens::blob::write(cfg, *model.processing(), activations, &tensors)
        .context("cannot write the blob")?;
    crate::text::hf::with_record(blob, model.tokenizer())
}

/// A tensor's key in the maps of finished tensors and of solvers ([`TensorId`] is not `Ord`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct TensorKey {
    kind: u8,
    layer: usize,
}

/// The map key of tensor `id`.
fn key(id: TensorId) -> TensorKey {
    TensorKey {
        kind: id.kind as u8,
        layer: id.layer,
    }
}

/// The matrices of `model` reading `site`, with their ids.
fn readers<'a>(model: &Model<'a>, site: MatrixInput) -> Vec<(TensorId, Matrix<'a>)> {
    Catalogue::new(model.config())
        .ids()
        .filter(|&id| MatrixInput::of(id) == Some(site))
        .filter_map(|id| Some((id, model.matrix(id)?)))
        .collect()
}

/// Bias `b` of the matrix `w` (`[outputs, inputs]`, its rounding `t`) taking up the mean error left:
/// `b + W mean - Ŵ mean_q`.
fn compensated_bias(
    model: &Model<'_>,
    b: TensorId,
    w: &DMatrix<f64>,
    t: &TensorData,
    c: &Compensation,
) -> Result<TensorData> {
    let rounded = as_matrix(&decode_matrix(t)?, w.ncols());
    let shift = w * &c.mean - rounded * &c.mean_q;
    let bias = model
        .vector(b)
        .ok_or_else(|| anyhow!("the model has no tensor {b}"))?;
    let values: Vec<f32> = bias
        .iter()
        .zip(shift.iter())
        .map(|(v, &s)| (v as f64 + s) as f32)
        .collect();
    encode_nearest(b, b.shape(model.config()), &values, DType::F32)
}

/// The tensors quantised before any site: the lookup tables by GPTQ against their output moments, and
/// every tensor no site reads (vectors, and matrices without an input site) rounded to nearest.
fn tables_and_rest(
    model: &Model<'_>,
    plan: Plan,
    seqs: &[Vec<u32>],
) -> Result<BTreeMap<TensorKey, TensorData>> {
    let cfg = *model.config();
    let mut done: BTreeMap<TensorKey, TensorData> = BTreeMap::new();
    let mut solvers: BTreeMap<TensorKey, Solver> = BTreeMap::new();
    for id in Catalogue::new(&cfg).ids() {
        let t = match model.matrix(id) {
            Some(m) if tables::is_table(id.kind) => {
                let moment = tables::moment_of(id);
                let solver = match solvers.entry(key(moment)) {
                    Entry::Occupied(s) => s.into_mut(),
                    Entry::Vacant(e) => e.insert(tables::solver(model, moment, seqs, false)?),
                };
                let values = matrix_values(&m);
                let shape = id.shape(&cfg);
                gptq::encode_gptq(id, shape, &values, plan.tables, solver, &gptq::I4_CLIPS)?
            }
            Some(_) if MatrixInput::of(id).is_some() => continue,
            _ => nearest_tensor(model, id, plan.dtype_of(id.kind))?,
        };
        done.insert(key(id), t);
    }
    Ok(done)
}

/// Every activation that matrices of `cfg` read, once each, in the order the forward pass computes them.
fn forward_order(cfg: &microlens::Config) -> Vec<MatrixInput> {
    let mut sites: Vec<MatrixInput> = Catalogue::new(cfg)
        .ids()
        .filter_map(MatrixInput::of)
        .collect();
    sites.sort_by_key(|s| match *s {
        MatrixInput::Attn(l) => (l, 0),
        MatrixInput::Z(l) => (l, 1),
        MatrixInput::MlpIn(l) => (l, 2),
        MatrixInput::MlpHidden(l) => (l, 3),
        MatrixInput::Unembed => (usize::MAX, 0),
    });
    sites.dedup();
    sites
}

/// Every tensor of `model` (`f32`) with its matrices quantised as `dtype` by GPTQ on `seqs`, against
/// `against`'s inputs, for a model computing with `activations`, stored and rounded as their [`Plan`]
/// says.
pub fn compensated_tensors(
    model: &Model<'_>,
    dtype: DType,
    activations: Activations,
    seqs: &[Vec<u32>],
    against: CalibrationInputs,
) -> Result<Vec<TensorData>> {
    let plan = Plan::of(dtype, activations);
    compensated_tensors_with(model, plan, activations, seqs, against)
}

/// [`compensated_tensors`] with any `plan` (to measure what each of its parts does).
pub fn compensated_tensors_with(
    model: &Model<'_>,
    plan: Plan,
    activations: Activations,
    seqs: &[Vec<u32>],
    against: CalibrationInputs,
) -> Result<Vec<TensorData>> {
    let cfg = *model.config();
    let dtype = plan.matrices;
    // Act order helped the int8 matrices, not the tables; groups need the inputs in order.
    let act_order = !gptq::grouped(dtype);
    let mut done = tables_and_rest(model, plan, seqs)?;
    let sites = forward_order(&cfg);
    let mut float = record(model, seqs, InputPrecision::Float, &sites)?;
    for site in sites {
        let ids = readers(model, site);
        let n = ids
            .first()
            .map(|(_, m)| m.cols())
            .ok_or_else(|| anyhow!("no matrix reads {site:?}"))?;
        let x = as_matrix(&float.remove(&site).unwrap_or_default(), n);
        let comp = match against {
            CalibrationInputs::Float => None,
            CalibrationInputs::Quantized => {
                let partial = partial_blob(model, activations, &done)?;
                let partial = Model::from_bytes(&partial)?;
                let quantized = record(&partial, seqs, InputPrecision::of(activations), &[site])?;
                let xq = as_matrix(quantized.get(&site).map_or(&[][..], Vec::as_slice), n);
                Some(compensate(&x, &xq)?)
            }
        };
        let float_h;
        let h = match &comp {
            Some(c) => &c.h,
            None => {
                float_h = x.transpose() * &x / x.nrows().max(1) as f64;
                &float_h
            }
        };
        let solver = Solver::new(h.as_slice(), n, gptq::DAMPING, act_order)?;
        for (id, m) in ids {
            let w = as_matrix(&matrix_values(&m), n);
            let target = match &comp {
                Some(c) => &w + &w * &c.shift,
                None => w.clone(),
            };
            let values: Vec<f32> = target.transpose().iter().map(|&v| v as f32).collect();
            let fisher = match plan.output_fisher {
                true => tables::output_moment_of(model, id, seqs)?,
                false => None,
            };
            let t = match fisher {
                Some(f) => {
                    // Rows by decreasing `F_rr`, as the inputs are ("act order").
                    let rows = Solver::new(&f, id.shape(&cfg)[0], gptq::DAMPING, true)?;
                    gptq::encode_gptq_rows(
                        id,
                        id.shape(&cfg),
                        &values,
                        dtype,
                        &solver,
                        &rows,
                        &gptq::I4_CLIPS,
                    )?
                }
                None => {
                    gptq::encode_gptq(id, id.shape(&cfg), &values, dtype, &solver, &gptq::I4_CLIPS)?
                }
            };
            if let (Some(c), Some(b)) = (&comp, bias_of(id, &cfg)) {
                done.insert(key(b), compensated_bias(model, b, &w, &t, c)?);
            }
            done.insert(key(id), t);
        }
    }
    Catalogue::new(&cfg)
        .ids()
        .map(|id| {
            done.remove(&key(id))
                .ok_or_else(|| anyhow!("tensor {id} was not quantised"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_shift_and_bias_undo_a_distortion_of_the_inputs() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let (count, n) = (2000, 5);
        let x = DMatrix::from_fn(count, n, |_, j| {
            rng.random_range(-1.0..1.0) * (1.0 + j as f64) + 0.5
        });
        // The quantised model's inputs: shrunk by 10%, offset, and with input 1 leaking into input 0.
        let mut xq = x.map(|v| 0.9 * v + 0.3);
        for t in 0..count {
            xq[(t, 0)] += 0.2 * x[(t, 1)];
        }
        let w = DMatrix::from_fn(3, n, |_, _| rng.random_range(-1.0..1.0));
        let c = compensate(&x, &xq).unwrap();
        let (xqc, mean_q) = centred(&xq);
        assert!((&c.h - xqc.transpose() * &xqc / count as f64).amax() < 1e-12);
        assert!((mean_q - &c.mean_q).amax() < 1e-12 && (c.mean_q[4] - 0.75).abs() < 0.1);
        let w_star = &w + &w * &c.shift;
        // `|W x - (V x̃ + b)|` over every token.
        let err = |v: &DMatrix<f64>, b: &DVector<f64>| {
            let mut e = &x * w.transpose() - &xq * v.transpose();
            for mut row in e.row_iter_mut() {
                row -= b.transpose();
            }
            e.norm()
        };
        let (zero, bias) = (DVector::zeros(3), &w * &c.mean - &w_star * &c.mean_q);
        let compensated = err(&w_star, &bias);
        assert!(compensated < 0.05 * err(&w, &zero), "{compensated}");
        // Without its bias the offset stays.
        assert!(compensated < 0.05 * err(&w_star, &zero), "{compensated}");
        // Nothing to undo: no shift.
        let same = compensate(&x, &x).unwrap();
        assert!(same.shift.amax() < 1e-12);
        assert!(compensate(&x, &xq.rows(0, 10).into_owned()).is_err());
    }
}
