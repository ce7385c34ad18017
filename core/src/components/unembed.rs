//! Unembedding: `logits = x W_U + b_U`.

use super::{Rows, Step};
use crate::blob::DType;
use crate::hooks::{HookKind, Hooks};
use crate::quant::linear::{batched, matmul_rows, Input};
use crate::tensors::{TensorId, TensorKind};
use crate::workspace::{row, Workspace};

/// `ws.logits` of the final normalised residuals `ws.normed` of the rows, quantised per token into `ws.quant` for an int8 `W_U` when the model computes with int8
/// activations.
pub(crate) fn forward<H: Hooks>(s: &mut Step<'_, '_, H>, ws: &mut Workspace<'_>, rows: Rows) {
    let n = rows.len();
    let w_u = s.model.matrix(TensorId::global(TensorKind::WU));
    let b_u = s.model.vector(TensorId::global(TensorKind::BU));
    let (dm, dv) = (s.cfg.d_model, s.cfg.d_vocab_out);
    // With the int8 kernel in the build, the bias goes into the product (added as it rescales); else
    // in a pass of its own (a float build's deepest stack runs through here: no extra argument).
    let (with, after) = match (&w_u, DType::I8.compiled()) {
        (Some(_), true) => (b_u, None),
        _ => (None, b_u),
    };
    let together = batched(s.act, n) && w_u.is_some();
    if let (Some(w_u), true) = (&w_u, together) {
        matmul_rows(w_u, b_u.as_ref(), ws.normed, n, ws.logits, dv);
    }
    rows.each(s, |s, r| {
        let logits = row(ws.logits, r, dv);
        if !together {
            if let Some(w_u) = &w_u {
                Input::new(row(ws.normed, r, dm), s.act, ws.quant).matvec(
                    w_u,
                    with.as_ref(),
                    logits,
                );
            }
            if let Some(b_u) = &after {
                b_u.add_to(logits);
            }
        }
        s.hook(HookKind::Logits, 0, logits);
    });
}
