//! Unembedding: `logits = x W_U + b_U`.

use super::Step;
use crate::hooks::{HookKind, Hooks};
use crate::quant::linear::Input;
use crate::tensors::{TensorId, TensorKind};
use crate::workspace::Workspace;

/// `ws.logits` of the final normalised residual `ws.normed` (quantised per token into `ws.quant` for
/// an int8 `W_U` when the model computes with int8 activations).
pub(crate) fn forward<H: Hooks>(s: &mut Step<'_, '_, H>, ws: &mut Workspace<'_>) {
    if let Some(w_u) = s.model.matrix(TensorId::global(TensorKind::WU)) {
        Input::new(ws.normed, s.act, ws.quant).matvec(&w_u, ws.logits);
    }
    if let Some(b_u) = s.model.vector(TensorId::global(TensorKind::BU)) {
        b_u.add_to(ws.logits);
    }
    s.hook(HookKind::Logits, 0, ws.logits);
}
