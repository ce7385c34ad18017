//! The updates of `W_out` (TransformerLens layout `[d_mlp, d_model]`, `mlp_out = post @ W_out + b_out`)
//! and the edits that use them.
//!
//! ROME, one fact at one layer: `W_out += C^-1 k delta^T / (k^T C^-1 k)` (the paper's
//! `W += (v - W k)(C^-1 k)^T / (k^T C^-1 k)` in the right-multiplying layout, `delta = v - W k`): the
//! key `k` now gives `k W_out + delta`, and a key `k'` moves by `(k'^T C^-1 k) / (k^T C^-1 k) delta`,
//! little for keys the calibration second moment `C` says are unlike `k`.
//!
//! MEMIT, several facts over layers `l0..=l1`: each fact's change `delta_i` of the residual stream at its
//! last subject token after layer `l1` is found first; then layer by layer, from `l0` up, the residual
//! still missing there, `r_i` (target minus what the model edited so far gives), is shared out over the
//! layers left, `r_i / (l1 - l + 1)`, and `W_out += (lambda C + K K^T)^-1 K R^T` (`K`: the current keys,
//! `R`: the shares, one column per fact).

use anyhow::{bail, ensure, Context, Result};
use microlens::{HookKind, Model};
use nalgebra::{DMatrix, DVector};

use super::blob::{in_blob_form, with_w_out_deltas};
use super::keys::{activations, key, second_moment};
use super::value::{find_value, Injection, ValueOptions};
use crate::train::facts::PromptTarget;

/// ROME's direction `u = C^-1 k / (k^T C^-1 k)` for key `k`, given `C` (symmetric positive definite):
/// `k . u = 1`.
pub fn rome_direction(c: &DMatrix<f64>, k: &DVector<f64>) -> Result<DVector<f64>> {
    let chol = c
        .clone()
        .cholesky()
        .context("the keys' second moment is not positive definite (raise --ridge)")?;
    let cik = chol.solve(k);
    let denom = k.dot(&cik);
    ensure!(
        denom > 0.0 && denom.is_finite(),
        "the key is zero: this MLP is silent at the subject token"
    );
    Ok(cik / denom)
}

/// ROME's rank-one update `u delta^T` for key `k` and output change `delta`.
pub fn rank_one(c: &DMatrix<f64>, k: &DVector<f64>, delta: &[f32]) -> Result<DMatrix<f64>> {
    let u = rome_direction(c, k)?;
    let d = DVector::from_iterator(delta.len(), delta.iter().map(|&x| x as f64));
    Ok(&u * d.transpose())
}

/// MEMIT's least-squares update `(lambda C + K K^T)^-1 K R^T` for keys `K [d_mlp, n]` and residuals
/// `R [d_model, n]`.
pub fn memit_update(
    c: &DMatrix<f64>,
    keys: &DMatrix<f64>,
    resid: &DMatrix<f64>,
    lambda: f64,
) -> Result<DMatrix<f64>> {
    let a = c * lambda + keys * keys.transpose();
    let chol = a
        .cholesky()
        .context("lambda C + K K^T is not positive definite (raise --ridge)")?;
    Ok(chol.solve(&(keys * resid.transpose())))
}

/// Where and how an edit is made.
#[derive(Clone, Debug, PartialEq)]
pub struct EditOptions {
    /// Calibration sequences for `C`.
    pub calibration: Vec<Vec<u32>>,
    /// Ridge added to `C`, as a fraction of its mean diagonal.
    pub ridge: f64,
    /// MEMIT's weight `lambda` of `C` against the new keys.
    pub lambda: f64,
    /// The value search.
    pub value: ValueOptions,
}

/// One fact to write, with the position of its last subject token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Prompt and new target.
    pub fact: PromptTarget,
    /// Position of the last subject token (the key's position).
    pub subject_last: usize,
}

/// An edited blob and what the search reached.
#[derive(Clone, Debug, PartialEq)]
pub struct Edited {
    /// The blob.
    pub blob: Vec<u8>,
    /// Target probability the value search reached, per request.
    pub searched_prob: Vec<f64>,
}

/// ROME: one fact at `layer`.
pub fn rome(model: &Model<'_>, req: &Request, layer: usize, opts: &EditOptions) -> Result<Edited> {
    let s = req.subject_last;
    let k = key(model, &req.fact.prompt, layer, s)?;
    let c = second_moment(model, &opts.calibration, layer, opts.ridge)?;
    let u = rome_direction(&c, &k)?;
    let how = Injection::RankOne {
        layer,
        u: u.iter().map(|&x| x as f32).collect(),
    };
    let (delta, p) = find_value(model, &req.fact.prompt, req.fact.target, &how, &opts.value)?;
    let d = DVector::from_iterator(delta.len(), delta.iter().map(|&x| x as f64));
    let update = in_blob_form(model, &u * d.transpose());
    Ok(Edited {
        blob: with_w_out_deltas(model, &[(layer, update)])?,
        searched_prob: vec![p],
    })
}

/// MEMIT rounds at most: a round whose start already gives every target its searched probability is
/// not made.
pub const MEMIT_ROUNDS: usize = 3;

/// MEMIT: every fact, spread over `layers` (ascending, non-empty). One round can leave a fact short
/// when the update also moves keys at the prompt's other positions (a subject token repeated); the
/// next round searches again from the edited model, up to [`MEMIT_ROUNDS`].
pub fn memit(
    model: &Model<'_>,
    reqs: &[Request],
    layers: &[usize],
    opts: &EditOptions,
) -> Result<Edited> {
    let mut blob = with_w_out_deltas(model, &[])?;
    let mut searched_prob = Vec::new();
    for _ in 0..MEMIT_ROUNDS {
        let current = Model::from_bytes(&blob)?;
        let Some((next, probs)) = memit_round(model, &current, reqs, layers, opts)? else {
            break;
        };
        blob = next;
        searched_prob = probs;
    }
    if searched_prob.is_empty() {
        bail!("every target already has the searched probability: nothing to write");
    }
    Ok(Edited {
        blob,
        searched_prob,
    })
}

/// One MEMIT round on `current` (`C` from the unedited `model`); `None` if no fact needs a change.
fn memit_round(
    model: &Model<'_>,
    current: &Model<'_>,
    reqs: &[Request],
    layers: &[usize],
    opts: &EditOptions,
) -> Result<Option<(Vec<u8>, Vec<f64>)>> {
    let top = *layers.last().context("no layers to edit")?;
    let resid_at = |m: &Model<'_>, r: &Request| -> Result<DVector<f64>> {
        let acts = activations(m, &r.fact.prompt, HookKind::ResidPost, top)?;
        let a = acts
            .get(r.subject_last)
            .context("subject outside the prompt")?;
        Ok(DVector::from_iterator(a.len(), a.iter().map(|&x| x as f64)))
    };
    let mut targets = Vec::with_capacity(reqs.len());
    let mut searched_prob = Vec::with_capacity(reqs.len());
    let mut any = false;
    for r in reqs {
        let how = Injection::At {
            layer: top,
            pos: r.subject_last,
        };
        let (delta, p) = find_value(current, &r.fact.prompt, r.fact.target, &how, &opts.value)?;
        any |= delta.iter().any(|&x| x != 0.0);
        let d = DVector::from_iterator(delta.len(), delta.iter().map(|&x| x as f64));
        targets.push(resid_at(current, r)? + d);
        searched_prob.push(p);
    }
    if !any {
        return Ok(None);
    }
    let mut blob = with_w_out_deltas(current, &[])?;
    for (i, &layer) in layers.iter().enumerate() {
        let now = Model::from_bytes(&blob)?;
        let c = second_moment(model, &opts.calibration, layer, opts.ridge)?;
        let d_mlp = c.nrows();
        let d_model = model.config().d_model;
        let mut keys = DMatrix::<f64>::zeros(d_mlp, reqs.len());
        let mut resid = DMatrix::<f64>::zeros(d_model, reqs.len());
        let share = (layers.len() - i) as f64;
        for (j, r) in reqs.iter().enumerate() {
            keys.set_column(j, &key(&now, &r.fact.prompt, layer, r.subject_last)?);
            resid.set_column(j, &((&targets[j] - resid_at(&now, r)?) / share));
        }
        let update = in_blob_form(model, memit_update(&c, &keys, &resid, opts.lambda)?);
        blob = with_w_out_deltas(&now, &[(layer, update)])?;
    }
    Ok(Some((blob, searched_prob)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_one_maps_the_key_and_spares_c_orthogonal_keys() {
        // C = diag(1, 2, 4): keys k and k' with k'^T C^-1 k = 0 are untouched.
        let c = DMatrix::from_diagonal(&DVector::from_vec(vec![1.0, 2.0, 4.0]));
        let k = DVector::from_vec(vec![1.0, 1.0, 0.0]);
        let other = DVector::from_vec(vec![0.0, 0.0, 3.0]);
        let delta = [0.5f32, -1.0];
        let u = rank_one(&c, &k, &delta).unwrap();
        let moved = u.transpose() * &k;
        assert!((moved[0] - 0.5).abs() < 1e-12 && (moved[1] + 1.0).abs() < 1e-12);
        assert!((u.transpose() * &other).norm() < 1e-12);
        assert!(rank_one(&c, &DVector::zeros(3), &delta).is_err());
    }

    #[test]
    fn memit_with_a_tiny_lambda_fits_every_key() {
        let c = DMatrix::identity(4, 4);
        let keys = DMatrix::from_column_slice(4, 2, &[1.0, 0.0, 2.0, 0.0, 0.0, 1.0, 0.0, 3.0]);
        let resid = DMatrix::from_column_slice(2, 2, &[1.0, 2.0, -1.0, 0.5]);
        let w = memit_update(&c, &keys, &resid, 1e-9).unwrap();
        let fit = w.transpose() * &keys;
        assert!((fit - resid).norm() < 1e-6);
    }
}
