//! The value: the change `delta` of `blocks.L.hook_mlp_out` that makes the target the prediction after
//! the prompt, found by Adam on `-log p(target) + decay * |delta|^2` with central finite-difference
//! gradients through the core forward (one forward pass per coordinate and sign: `2 d_model` short
//! runs per step, cheap for tiny models; no second forward implementation).
//!
//! Where `delta` enters ([`Injection`]): at the last subject token only (MEMIT's residual target), or
//! as the rank-one update `W_out += u delta^T` itself (ROME, `u = C^-1 k / (k^T C^-1 k)`): every
//! position's MLP output moves by `(k_p . u) delta`, so keys at the prompt's other positions that
//! resemble `k` (a repeated subject token) move as they will in the edited model, and the search
//! optimises exactly the edited model.

use anyhow::{Context, Result};
use microlens::{HookKind, HookPoint, Hooks, Model};
use rayon::prelude::*;

use crate::eval::metrics::log_softmax;
use crate::eval::run::run_with_hooks;

/// Where the searched `delta` is added to `blocks.L.hook_mlp_out`.
#[derive(Clone, Debug, PartialEq)]
pub enum Injection {
    /// At position `pos` only.
    At {
        /// Layer.
        layer: usize,
        /// Position.
        pos: usize,
    },
    /// At every position `p`, times `k_p . u` (`k_p` the layer's `mlp.hook_post` there): the rank-one
    /// update `W_out += u delta^T`.
    RankOne {
        /// Layer.
        layer: usize,
        /// `u` (`d_mlp`).
        u: Vec<f32>,
    },
}

/// Adds `delta` as an [`Injection`] says.
struct Inject<'a> {
    how: &'a Injection,
    delta: &'a [f32],
    /// Per position, `u . hidden` (a run of positions meets `hook_post` of every position before
    /// their `hook_mlp_out`).
    coef: Vec<f32>,
}

impl Hooks for Inject<'_> {
    fn wants(&self, kind: HookKind) -> bool {
        kind == HookKind::MlpOut
            || (kind == HookKind::MlpPost && matches!(self.how, Injection::RankOne { .. }))
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        let coef = match (self.how, p.kind) {
            (Injection::At { layer, pos }, _) if p.layer == *layer && p.pos == *pos => 1.0,
            (Injection::RankOne { layer, u }, HookKind::MlpPost) if p.layer == *layer => {
                if self.coef.len() <= p.pos {
                    self.coef.resize(p.pos + 1, 0.0);
                }
                self.coef[p.pos] = act.iter().zip(u).map(|(a, u)| a * u).sum();
                return;
            }
            (Injection::RankOne { layer, .. }, HookKind::MlpOut) if p.layer == *layer => {
                self.coef.get(p.pos).copied().unwrap_or(0.0)
            }
            _ => return,
        };
        act.iter_mut()
            .zip(self.delta)
            .for_each(|(a, d)| *a += coef * d);
    }
}

/// Settings of the search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValueOptions {
    /// Adam steps at most.
    pub steps: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Weight of `|delta|^2` in the loss.
    pub decay: f64,
    /// Stop once the target's probability reaches this.
    pub target_prob: f64,
    /// Finite-difference step.
    pub h: f64,
}

impl Default for ValueOptions {
    fn default() -> Self {
        ValueOptions {
            steps: 300,
            lr: 0.05,
            decay: 1e-3,
            target_prob: 0.95,
            h: 1e-2,
        }
    }
}

/// `log p(target)` at the last position with `delta` added as `how` says.
pub fn target_logprob(
    model: &Model<'_>,
    prompt: &[u32],
    target: u32,
    how: &Injection,
    delta: &[f32],
) -> Result<f64> {
    let mut hooks = Inject {
        how,
        delta,
        coef: Vec::new(),
    };
    let logits = run_with_hooks(model, prompt, &mut hooks)?;
    let last = logits.last().context("empty prompt")?;
    Ok(log_softmax(last)[target as usize])
}

/// The `delta` of `hook_mlp_out`, added as `how` says, that makes `target` follow `prompt`, and the
/// target's probability with it.
pub fn find_value(
    model: &Model<'_>,
    prompt: &[u32],
    target: u32,
    how: &Injection,
    opts: &ValueOptions,
) -> Result<(Vec<f32>, f64)> {
    let d = model.config().d_model;
    let (mut x, mut m, mut v) = (vec![0f64; d], vec![0f64; d], vec![0f64; d]);
    let (b1, b2, eps) = (0.9, 0.999, 1e-8);
    let as_f32 = |x: &[f64]| x.iter().map(|&v| v as f32).collect::<Vec<f32>>();
    let mut lp = target_logprob(model, prompt, target, how, &as_f32(&x))?;
    for t in 1..=opts.steps {
        if lp.exp() >= opts.target_prob {
            break;
        }
        let grad = (0..d)
            .into_par_iter()
            .map(|i| -> Result<f64> {
                let mut plus = x.clone();
                plus[i] += opts.h;
                let mut minus = x.clone();
                minus[i] -= opts.h;
                let f = |y: &[f64]| target_logprob(model, prompt, target, how, &as_f32(y));
                Ok(-(f(&plus)? - f(&minus)?) / (2.0 * opts.h) + 2.0 * opts.decay * x[i])
            })
            .collect::<Result<Vec<f64>>>()?;
        for i in 0..d {
            m[i] = b1 * m[i] + (1.0 - b1) * grad[i];
            v[i] = b2 * v[i] + (1.0 - b2) * grad[i] * grad[i];
            let mh = m[i] / (1.0 - b1.powi(t as i32));
            let vh = v[i] / (1.0 - b2.powi(t as i32));
            x[i] -= opts.lr * mh / (vh.sqrt() + eps);
        }
        lp = target_logprob(model, prompt, target, how, &as_f32(&x))?;
    }
    Ok((as_f32(&x), lp.exp()))
}
