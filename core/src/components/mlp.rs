//! The MLP: `out = act(x W_in + b_in) W_out + b_out`.

use super::block::MlpWeights;
use crate::blob::{Activations, DType};
use crate::config::Config;
use crate::hooks::{call, HookKind, Hooks};
use crate::math::activation;
use crate::quant::{linear::matvec, offset};

/// MLP of block `layer` on `x`, using `hidden` (`d_mlp`) and writing `out`. With int8 activations, `x`
/// and the activated `hidden` are each quantised per token into `scratch` for the integer matmuls, the
/// hidden vector centred on its mid-range first ([`offset`]: it is mostly of one sign); the activation
/// function itself runs in `f32` between them, where the hooks see it.
#[allow(clippy::too_many_arguments)]
pub fn forward<H: Hooks>(
    cfg: &Config,
    activations: Activations,
    scratch: &mut [i8],
    w: &MlpWeights<'_>,
    layer: usize,
    pos: usize,
    x: &[f32],
    hidden: &mut [f32],
    out: &mut [f32],
    hooks: &mut H,
) {
    matvec(&w.w_in, x, activations, scratch, hidden);
    w.b_in.add_to(hidden);
    call(hooks, HookKind::MlpPre, layer, 0, pos, hidden);
    activation::apply(cfg.act_fn, hidden);
    call(hooks, HookKind::MlpPost, layer, 0, pos, hidden);
    let integer = matches!(w.w_out.dtype(), DType::I8 | DType::I4);
    let c = if activations == Activations::I8 && integer {
        offset::centre(hidden)
    } else {
        0.0
    };
    matvec(&w.w_out, hidden, activations, scratch, out);
    if c != 0.0 {
        offset::add_row_sums(&w.w_out, c, scratch, out);
    }
    w.b_out.add_to(out);
    call(hooks, HookKind::MlpOut, layer, 0, pos, out);
}
