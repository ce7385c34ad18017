//! The MLP: `out = act(x W_in + b_in) W_out + b_out`.

use super::block::MlpWeights;
use super::Step;
use crate::hooks::{HookKind, Hooks};
use crate::math::activation;
use crate::quant::linear::{Centred, Input};
use crate::workspace::Workspace;

/// MLP of the step's block on `ws.normed`, using `ws.mlp` (`d_mlp`) and writing `ws.mlp_out`. With
/// int8 activations, the input and the activated hidden vector are each quantised per token into
/// `ws.quant` for the integer matmuls, the hidden vector centred on its mid-range first
/// ([`Centred`]: it is mostly of one sign); the activation function itself runs in `f32` between
/// them, where the hooks see it.
pub(crate) fn forward<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    w: &MlpWeights<'_>,
    ws: &mut Workspace<'_>,
) {
    let hidden = &mut *ws.mlp;
    Input::new(ws.normed, s.act, ws.quant).matvec(&w.w_in, Some(&w.b_in), hidden);
    s.hook(HookKind::MlpPre, 0, hidden);
    activation::apply(s.cfg.act_fn, hidden);
    s.hook(HookKind::MlpPost, 0, hidden);
    Centred::new(hidden, s.act, &w.w_out, ws.quant).matvec(&w.w_out, ws.mlp_out);
    w.b_out.add_to(ws.mlp_out);
    s.hook(HookKind::MlpOut, 0, ws.mlp_out);
}
