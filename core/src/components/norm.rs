//! A hooked norm: `ln1`, `ln2` or `ln_final` applied to the residual stream.

use super::block::NormWeights;
use crate::config::{Config, Normalization};
use crate::hooks::{call, HookKind, Hooks};
use crate::math::norm;

/// Which norm, for its hook names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// `blocks.L.ln1`.
    Ln1,
    /// `blocks.L.ln2`.
    Ln2,
    /// `ln_final`.
    Final,
}

impl Which {
    fn hooks(self) -> (HookKind, HookKind) {
        match self {
            Which::Ln1 => (HookKind::Ln1Scale, HookKind::Ln1Normalized),
            Which::Ln2 => (HookKind::Ln2Scale, HookKind::Ln2Normalized),
            Which::Final => (HookKind::LnFinalScale, HookKind::LnFinalNormalized),
        }
    }
}

/// `out = norm(x)`: centre (LN), `hook_scale`, divide, then `* w + b` and `hook_normalized` for LN, or
/// `hook_normalized` then `* w` for RMS (TransformerLens 2.x's placement).
#[allow(clippy::too_many_arguments)]
pub fn forward<H: Hooks>(
    cfg: &Config,
    which: Which,
    w: &NormWeights<'_>,
    layer: usize,
    pos: usize,
    x: &[f32],
    out: &mut [f32],
    hooks: &mut H,
) {
    out.iter_mut().zip(x).for_each(|(o, x)| *o = *x);
    let n = cfg.normalization;
    if !n.is_some() || !crate::features::NORM {
        return;
    }
    let (scale_hook, normalized_hook) = which.hooks();
    let mut scale = [norm::scale(n, cfg.eps, out)];
    call(hooks, scale_hook, layer, 0, pos, &mut scale);
    norm::divide(n, scale[0], out);
    let rms = matches!(n, Normalization::RMS | Normalization::RMSPre);
    if rms {
        call(hooks, normalized_hook, layer, 0, pos, out);
    }
    norm::affine(w.w, w.b, out);
    if !rms {
        call(hooks, normalized_hook, layer, 0, pos, out);
    }
}
