//! The MLP: `out = act(x W_in + b_in) W_out + b_out`; gated (SwiGLU with `silu`):
//! `out = (act(x W_gate) * (x W_in) + b_in) W_out + b_out`, as TransformerLens's `GatedMLP`.

use super::{Rows, Step};
use crate::hooks::{HookKind, Hooks};
use crate::math::activation;
use crate::quant::linear::{batched, matmul_rows, Centred, Input};
use crate::weights::{Matrix, Vector};
use crate::workspace::{row, Workspace};

/// MLP weights of one block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MlpWeights<'a> {
    /// `W_gate`, `[d_mlp, d_model]`, for gated MLPs.
    pub w_gate: Option<Matrix<'a>>,
    /// `W_in`, `[d_mlp, d_model]`.
    pub w_in: Matrix<'a>,
    /// `b_in`.
    pub b_in: Vector<'a>,
    /// `W_out`, `[d_model, d_mlp]`.
    pub w_out: Matrix<'a>,
    /// `b_out`.
    pub b_out: Vector<'a>,
}

/// MLP of the step's block on `ws.normed` of the rows, using `ws.mlp` (`d_mlp` per position; a gated
/// MLP also `ws.gate`) and writing `ws.mlp_out`. With int8 activations, the input and the hidden
/// vector are each quantised per token into `ws.quant` for the integer matmuls (the input once for
/// `W_gate` and `W_in`), the hidden vector centred on its mid-range first ([`Centred`]: it is mostly
/// of one sign); the activation function and the gate's product run in `f32` between them, where the
/// hooks see them.
pub(crate) fn forward<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    w: &MlpWeights<'_>,
    ws: &mut Workspace<'_>,
    rows: Rows,
) {
    let (dm, d_mlp, act, n) = (s.cfg.d_model, s.cfg.d_mlp_or_zero(), s.act, rows.len());
    let together = batched(act, n);
    // The matrix (and bias) giving `hook_pre`: `W_gate` (no bias) for a gated MLP, else `W_in`.
    let (w_pre, b_pre) = match &w.w_gate {
        Some(g) => (g, None),
        None => (&w.w_in, Some(&w.b_in)),
    };
    if together {
        matmul_rows(w_pre, b_pre, ws.normed, n, ws.mlp, d_mlp);
        if w.w_gate.is_some() {
            matmul_rows(&w.w_in, None, ws.normed, n, ws.gate, d_mlp);
        }
    }
    rows.each(s, |s, r| {
        let hidden = row(ws.mlp, r, d_mlp);
        let linear = row(ws.gate, r, d_mlp);
        if !together {
            let mut x = Input::new(row(ws.normed, r, dm), act, ws.quant);
            x.matvec(w_pre, b_pre, hidden);
            if w.w_gate.is_some() {
                x.matvec(&w.w_in, None, linear);
            }
        }
        s.hook(HookKind::MlpPre, 0, hidden);
        if w.w_gate.is_some() {
            // TransformerLens's order: `hook_pre_linear` before the activation and its product.
            s.hook(HookKind::MlpPreLinear, 0, linear);
            activation::apply_gated(s.cfg.act_fn, hidden, linear);
            w.b_in.add_to(hidden);
        } else {
            activation::apply(s.cfg.act_fn, hidden);
        }
        s.hook(HookKind::MlpPost, 0, hidden);
        if !together {
            let out = row(ws.mlp_out, r, dm);
            Centred::new(hidden, act, &w.w_out, ws.quant).matvec(&w.w_out, out);
            w.b_out.add_to(out);
        }
    });
    if together {
        matmul_rows(&w.w_out, Some(&w.b_out), ws.mlp, n, ws.mlp_out, dm);
    }
    rows.each(s, |s, r| {
        s.hook(HookKind::MlpOut, 0, row(ws.mlp_out, r, dm))
    });
}
