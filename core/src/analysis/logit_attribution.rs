//! Direct logit attribution per head, for the current position.
//!
//! The direct effect of head `h`'s output `r_h` (`hook_result`) on a residual direction `u`, through the
//! final norm with its scale frozen (TransformerLens's `apply_ln_to_stack`, then `@ W_U[:, t]`):
//! `DLA_h = (r_h - mean(r_h)) · u / scale_final`, with `u = ln_final.w ⊙ W_U[:, t]` (`w` = 1 for models
//! without a norm weight, e.g. folded ones) and the centring `- mean(r_h)` only for centring norms
//! (LN, LNPre; not RMS); `scale_final` is `ln_final.hook_scale` (1 without a norm). Since
//! `(r - mean r) · u = r · (u - mean u)`, the direction is centred once instead. On a folded (processed)
//! model this is exactly `cache.logit_attrs` of TransformerLens; summed with the same attribution of the
//! other residual components plus `ln_final.b · W_U[:, t] + b_U[t]`, it gives the logit.

use crate::hooks::{HookKind, HookPoint, Hooks};
use crate::model::Model;
use crate::tensors::{TensorId, TensorKind};

/// Per-head direct logit attribution of the current position to a direction in the residual stream,
/// written into a `[n_layers][n_heads]` buffer each step (complete once the step returns): for
/// [`crate::Session::step_with`], one position at a time (a session of several rows calls the hooks
/// layer by layer across its positions).
#[derive(Debug)]
pub struct DirectLogitAttribution<'a> {
    direction: &'a mut [f32],
    out: &'a mut [f32],
    n_heads: usize,
    centre: bool,
}

/// `u = w ⊙ (W_U[:, answer] - W_U[:, wrong])` (no `wrong`: `w ⊙ W_U[:, answer]`) into `dir`; `None` if a
/// token is out of range or `dir` is not `d_model` long.
fn unembed_direction(
    model: &Model<'_>,
    answer: usize,
    wrong: Option<usize>,
    dir: &mut [f32],
) -> Option<()> {
    let cfg = model.config();
    let w_u = model.matrix(TensorId::global(TensorKind::WU))?;
    let in_range = |t: usize| t < cfg.d_vocab_out;
    if !in_range(answer) || !wrong.is_none_or(in_range) || dir.len() != cfg.d_model {
        return None;
    }
    w_u.row_into(answer, dir);
    if let Some(wrong) = wrong {
        // One element at a time (no scratch row): `dot` over a single column reads W_U[wrong, i].
        for (i, d) in dir.iter_mut().enumerate() {
            *d -= w_u.dot(wrong, i, &[1.0]);
        }
    }
    if let Some(w) = model.vector(TensorId::global(TensorKind::LnFinalW)) {
        dir.iter_mut().zip(w.iter()).for_each(|(d, w)| *d *= w);
    }
    Some(())
}

impl<'a> DirectLogitAttribution<'a> {
    /// Attribution of the logit of `token`, using `direction` (`d_model` words) as scratch and writing
    /// `out` (`n_layers * n_heads` words). `None` if a buffer has the wrong size or `token` is out of range.
    pub fn token(
        model: &Model<'_>,
        token: usize,
        direction: &'a mut [f32],
        out: &'a mut [f32],
    ) -> Option<Self> {
        unembed_direction(model, token, None, direction)?;
        Self::direction(model, direction, out)
    }

    /// Attribution of the logit difference `logit[answer] - logit[wrong]`.
    pub fn logit_diff(
        model: &Model<'_>,
        answer: usize,
        wrong: usize,
        direction: &'a mut [f32],
        out: &'a mut [f32],
    ) -> Option<Self> {
        unembed_direction(model, answer, Some(wrong), direction)?;
        Self::direction(model, direction, out)
    }

    /// Attribution to an arbitrary residual direction `u`, given in `direction` (`d_model` words; centred
    /// here for centring norms), writing `out` (`n_layers * n_heads` words).
    pub fn direction(
        model: &Model<'_>,
        direction: &'a mut [f32],
        out: &'a mut [f32],
    ) -> Option<Self> {
        let cfg = model.config();
        if out.len() != cfg.n_layers * cfg.n_heads || direction.len() != cfg.d_model {
            return None;
        }
        let mut this = DirectLogitAttribution {
            direction,
            out,
            n_heads: cfg.n_heads,
            centre: cfg.normalization.centers(),
        };
        this.finish_direction();
        Some(this)
    }

    fn finish_direction(&mut self) {
        self.out.fill(0.0);
        if self.centre && !self.direction.is_empty() {
            let mean = self.direction.iter().sum::<f32>() / self.direction.len() as f32;
            self.direction.iter_mut().for_each(|d| *d -= mean);
        }
    }

    /// The attributions of the last step, `[n_layers][n_heads]`.
    pub fn values(&self) -> &[f32] {
        self.out
    }

    /// The (centred) direction attributed to.
    pub fn direction_vector(&self) -> &[f32] {
        self.direction
    }
}

impl Hooks for DirectLogitAttribution<'_> {
    #[inline]
    fn wants(&self, kind: HookKind) -> bool {
        matches!(kind, HookKind::Result | HookKind::LnFinalScale)
    }

    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        match p.kind {
            HookKind::Result => {
                let dot = act
                    .iter()
                    .zip(self.direction.iter())
                    .fold(0.0f32, |s, (r, u)| s + r * u);
                if let Some(o) = self.out.get_mut(p.layer * self.n_heads + p.head) {
                    *o = dot;
                }
            }
            HookKind::LnFinalScale => {
                let scale = act.first().copied().unwrap_or(1.0);
                self.out.iter_mut().for_each(|o| *o /= scale);
            }
            _ => {}
        }
    }
}
