//! Unembedding: `logits = x W_U + b_U`.

use super::Step;
use crate::hooks::{HookKind, Hooks};
use crate::quant::linear::Input;
use crate::tensors::{TensorId, TensorKind};
use crate::workspace::Workspace;

/// `ws.logits` of the final normalised residual `ws.normed` (quantised per token into `ws.quant` for
/// an int8 `W_U` when the model computes with int8 activations).
pub(crate) fn forward<H: Hooks>(s: &mut Step<'_, '_, H>, ws: &mut Workspace<'_>) {
    let b_u = s.model.vector(TensorId::global(TensorKind::BU));
    match s.model.matrix(TensorId::global(TensorKind::WU)) {
        Some(w_u) => Input::new(ws.normed, s.act, ws.quant).matvec(&w_u, b_u.as_ref(), ws.logits),
        None => b_u.iter().for_each(|b| b.add_to(ws.logits)),
    }
    s.hook(HookKind::Logits, 0, ws.logits);
}
