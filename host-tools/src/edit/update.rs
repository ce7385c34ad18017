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

use anyhow::{ensure, Context, Result};
use microlens::{HookKind, Model};
use nalgebra::{DMatrix, DVector};

use super::blob::{in_blob_form, with_w_out_deltas};
use super::keys::{activations, key, second_moment};
use super::value::{find_value, ValueOptions};
use crate::train::facts::PromptTarget;

/// ROME's rank-one update for key `k` and output change `delta`, given `C` (symmetric positive definite).
pub fn rank_one(c: &DMatrix<f64>, k: &DVector<f64>, delta: &[f32]) -> Result<DMatrix<f64>> {
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
    let d = DVector::from_iterator(delta.len(), delta.iter().map(|&x| x as f64));
    Ok(&cik * d.transpose() / denom)
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
    let (delta, p) = find_value(
        model,
        &req.fact.prompt,
        req.fact.target,
        layer,
        s,
        &opts.value,
    )?;
    let update = in_blob_form(model, rank_one(&c, &k, &delta)?);
    Ok(Edited {
        blob: with_w_out_deltas(model, &[(layer, update)])?,
        searched_prob: vec![p],
    })
}

/// MEMIT: every fact, spread over `layers` (ascending, non-empty).
pub fn memit(
    model: &Model<'_>,
    reqs: &[Request],
    layers: &[usize],
    opts: &EditOptions,
) -> Result<Edited> {
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
    for r in reqs {
        let (delta, p) = find_value(
            model,
            &r.fact.prompt,
            r.fact.target,
            top,
            r.subject_last,
            &opts.value,
        )?;
        let d = DVector::from_iterator(delta.len(), delta.iter().map(|&x| x as f64));
        targets.push(resid_at(model, r)? + d);
        searched_prob.push(p);
    }
    let mut blob = with_w_out_deltas(model, &[])?;
    for (i, &layer) in layers.iter().enumerate() {
        let current = Model::from_bytes(&blob)?;
        let c = second_moment(model, &opts.calibration, layer, opts.ridge)?;
        let d_mlp = c.nrows();
        let d_model = model.config().d_model;
        let mut keys = DMatrix::<f64>::zeros(d_mlp, reqs.len());
        let mut resid = DMatrix::<f64>::zeros(d_model, reqs.len());
        let share = (layers.len() - i) as f64;
        for (j, r) in reqs.iter().enumerate() {
            keys.set_column(j, &key(&current, &r.fact.prompt, layer, r.subject_last)?);
            resid.set_column(j, &((&targets[j] - resid_at(&current, r)?) / share));
        }
        let update = in_blob_form(model, memit_update(&c, &keys, &resid, opts.lambda)?);
        blob = with_w_out_deltas(&current, &[(layer, update)])?;
    }
    Ok(Edited {
        blob,
        searched_prob,
    })
}
