//! Unembedding: `logits = x W_U + b_U`.

use super::Step;
use crate::blob::DType;
use crate::hooks::{HookKind, Hooks};
use crate::quant::linear::Input;
use crate::tensors::{TensorId, TensorKind};
use crate::workspace::Workspace;

/// `ws.logits` of the final normalised residual `ws.normed` (quantised per token into `ws.quant` for
/// an int8 `W_U` when the model computes with int8 activations).
pub(crate) fn forward<H: Hooks>(s: &mut Step<'_, '_, H>, ws: &mut Workspace<'_>) {
    let w_u = s.model.matrix(TensorId::global(TensorKind::WU));
    let b_u = s.model.vector(TensorId::global(TensorKind::BU));
    // With the int8 kernel in the build, the bias goes into the product (added as it rescales); else
    // in a pass of its own (a float build's deepest stack runs through here: no extra argument).
    let (with, after) = match (&w_u, DType::I8.compiled()) {
        (Some(_), true) => (b_u, None),
        _ => (None, b_u),
    };
    if let Some(w_u) = w_u {
        Input::new(ws.normed, s.act, ws.quant).matvec(&w_u, with.as_ref(), ws.logits);
    }
    if let Some(b_u) = after {
        b_u.add_to(ws.logits);
    }
    s.hook(HookKind::Logits, 0, ws.logits);
}
