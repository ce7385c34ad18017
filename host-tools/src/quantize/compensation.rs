//! GPTQ over a whole model. The tables `W_E`/`W_pos` are rounded against the output Fisher
//! ([`super::embedding`]); the other matrices either each against the float model's inputs (plain
//! GPTQ, [`Against::Float`]) or, in forward order, with the errors of what is already quantised
//! compensated ([`Against::Quantized`]): each site's matrices are rounded against the inputs the model
//! produces with everything before them quantised (and its int8 activations and KV cache), after
//! moving their float weights to the ones that best reproduce the float model's outputs from those
//! inputs. With `x` the float model's inputs and `x̃` the quantised one's, `W* = W + W E (H̃ + λI)⁻¹`,
//! `E = E[(x - x̃) x̃ᵀ]`, `H̃ = E[x̃ x̃ᵀ]`, minimises `E|W x - W* x̃|²` (up to the damping `λ`), and
//! `E|W x - Ŵ x̃|² = E|W x - W* x̃|² + E|(W* - Ŵ) x̃|²`, so GPTQ of `W*` against `H̃` minimises the
//! whole error.

use std::collections::BTreeMap;

use anyhow::{anyhow, ensure, Result};
use microlens::blob::{Activations, TensorData};
use microlens::tensors::Catalogue;
use microlens::weights::Matrix;
use microlens::{DType, Model, TensorId};
use nalgebra::DMatrix;

use super::calibration::{record, Inputs, Site};
use super::gptq::{self, Solver};
use super::{embedding, matrix_values, requantize_tensor, Against};

/// `rows` (`[count][n]`) as a matrix.
fn as_matrix(rows: &[f32], n: usize) -> DMatrix<f64> {
    DMatrix::from_row_iterator(rows.len() / n.max(1), n, rows.iter().map(|&v| v as f64))
}

/// The second moment of `xq` and the shift `E (H̃ + λI)⁻¹` that moves `W` to `W*` (module docs), from
/// the float model's inputs `x` and the quantised model's `xq` at the same tokens (`[tokens][n]`).
fn compensate(x: &DMatrix<f64>, xq: &DMatrix<f64>) -> Result<(DMatrix<f64>, Option<DMatrix<f64>>)> {
    ensure!(
        x.shape() == xq.shape(),
        "the quantised model saw {} inputs where the float model saw {}",
        xq.nrows(),
        x.nrows()
    );
    let n = x.ncols();
    let count = xq.nrows().max(1) as f64;
    let h = xq.transpose() * xq / count;
    let e = (x - xq).transpose() * xq / count;
    let mut damped = h.clone();
    let lambda = gptq::DAMPING * h.diagonal().mean().max(f64::MIN_POSITIVE);
    for i in 0..n {
        damped[(i, i)] += lambda;
    }
    let inverse = damped
        .try_inverse()
        .ok_or_else(|| anyhow!("the calibration Hessian is singular"))?;
    Ok((h, Some(e * inverse)))
}

/// The blob of `model` with the tensors in `done` quantised and the others `f32`.
fn partial_blob(
    model: &Model<'_>,
    activations: Activations,
    done: &BTreeMap<(u8, usize), TensorData>,
) -> Result<Vec<u8>> {
    let cfg = model.config();
    let tensors: Vec<TensorData> = Catalogue::new(cfg)
        .ids()
        .map(|id| match done.get(&key(id)) {
            Some(t) => Ok(t.clone()),
            None => requantize_tensor(model, id, DType::F32),
        })
        .collect::<Result<_>>()?;
    microlens::blob::write(cfg, *model.processing(), activations, &tensors)
        .map_err(|e| anyhow!("cannot write the blob: {e}"))
}

/// A tensor's key in the map of finished tensors.
fn key(id: TensorId) -> (u8, usize) {
    (id.kind as u8, id.layer)
}

/// The matrices of `model` reading `site`, with their ids.
fn readers<'a>(model: &Model<'a>, site: Site) -> Vec<(TensorId, Matrix<'a>)> {
    Catalogue::new(model.config())
        .ids()
        .filter(|&id| Site::of(id) == Some(site))
        .filter_map(|id| Some((id, model.matrix(id)?)))
        .collect()
}

/// Every tensor of `model` (`f32`) with its matrices quantised as `dtype` by GPTQ on `seqs`, against
/// `against`'s inputs, for a model computing with `activations`.
pub fn requantize_tensors(
    model: &Model<'_>,
    dtype: DType,
    activations: Activations,
    seqs: &[Vec<u32>],
    against: Against,
) -> Result<Vec<TensorData>> {
    let cfg = *model.config();
    // Act order helped the int8 matrices, not the tables; int4 groups need the inputs in order.
    let act_order = dtype != DType::I4;
    let mut done: BTreeMap<(u8, usize), TensorData> = BTreeMap::new();
    let tables = embedding::solver(model, seqs, false)?;
    for id in Catalogue::new(&cfg).ids() {
        let t = match model.matrix(id) {
            Some(m) if embedding::is_residual_table(id.kind) => {
                let values = matrix_values(&m);
                gptq::encode_matrix(id, id.shape(&cfg), &values, dtype, &tables, &gptq::I4_CLIPS)?
            }
            Some(_) if Site::of(id).is_some() => continue,
            _ => requantize_tensor(model, id, dtype)?,
        };
        done.insert(key(id), t);
    }
    let mut sites: Vec<Site> = Catalogue::new(&cfg).ids().filter_map(Site::of).collect();
    sites.sort_by_key(|s| match *s {
        Site::Attn(l) => (l, 0),
        Site::Z(l) => (l, 1),
        Site::MlpIn(l) => (l, 2),
        Site::MlpHidden(l) => (l, 3),
        Site::Unembed => (usize::MAX, 0),
    });
    sites.dedup();
    let mut float = record(model, seqs, Inputs::Float, &sites)?;
    for site in sites {
        let ids = readers(model, site);
        let n = ids
            .first()
            .map(|(_, m)| m.cols())
            .ok_or_else(|| anyhow!("no matrix reads {site:?}"))?;
        let x = as_matrix(&float.remove(&site).unwrap_or_default(), n);
        let (h, shift) = match against {
            Against::Float => (x.transpose() * &x / x.nrows().max(1) as f64, None),
            Against::Quantized => {
                let partial = partial_blob(model, activations, &done)?;
                let partial = Model::from_bytes(&partial)?;
                let quantized = record(&partial, seqs, Inputs::of(activations), &[site])?;
                let xq = as_matrix(quantized.get(&site).map_or(&[][..], Vec::as_slice), n);
                compensate(&x, &xq)?
            }
        };
        let solver = Solver::new(h.as_slice(), n, gptq::DAMPING, act_order)?;
        for (id, m) in ids {
            let w = as_matrix(&matrix_values(&m), n);
            let target = match &shift {
                Some(shift) => &w + &w * shift,
                None => w,
            };
            let values: Vec<f32> = target.transpose().iter().map(|&v| v as f32).collect();
            let t =
                gptq::encode_matrix(id, id.shape(&cfg), &values, dtype, &solver, &gptq::I4_CLIPS)?;
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
    fn the_shift_undoes_a_distortion_of_the_inputs() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let (count, n) = (2000, 5);
        let x = DMatrix::from_fn(count, n, |_, j| {
            rng.random_range(-1.0..1.0) * (1.0 + j as f64)
        });
        // The quantised model's inputs: shrunk by 10% and with input 1 leaking into input 0.
        let mut xq = &x * 0.9;
        for t in 0..count {
            xq[(t, 0)] += 0.2 * x[(t, 1)];
        }
        let w = DMatrix::from_fn(3, n, |_, _| rng.random_range(-1.0..1.0));
        let (h, shift) = compensate(&x, &xq).unwrap();
        assert!((&h - xq.transpose() * &xq / count as f64).amax() < 1e-12);
        let w_star = &w + &w * shift.unwrap();
        let err = |v: &DMatrix<f64>| (&x * w.transpose() - &xq * v.transpose()).norm();
        assert!(
            err(&w_star) < 0.05 * err(&w),
            "{} vs {}",
            err(&w_star),
            err(&w)
        );
        // Nothing to undo: no shift.
        let (_, none) = compensate(&x, &x).unwrap();
        assert!(none.unwrap().amax() < 1e-12);
        assert!(compensate(&x, &xq.rows(0, 10).into_owned()).is_err());
    }
}
