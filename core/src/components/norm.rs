//! A hooked norm: `ln1`, `ln2` or `ln_final` applied to the residual stream.

use super::{Rows, Step};
use crate::config::Normalization;
use crate::hooks::{HookKind, Hooks};
use crate::math::norm;
use crate::model::Model;
use crate::tensors::{TensorId, TensorKind};
use crate::weights::Vector;
use crate::workspace::{row, Workspace};

/// Which norm, for its hook names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
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

/// Norm parameters (absent for parameter-free norms).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NormWeights<'a> {
    /// Which norm (its hook names).
    pub which: Which,
    /// Weight `w`.
    pub w: Option<Vector<'a>>,
    /// Bias `b`.
    pub b: Option<Vector<'a>>,
}

impl<'a> NormWeights<'a> {
    /// The tensors `w` and `b` of `model`, looked up only with norms compiled in (without them
    /// `norm::forward` reads none, and the lookups would only cost code and time).
    pub fn load(model: &Model<'a>, which: Which, w: TensorId, b: TensorId) -> Self {
        let get = |id| crate::features::NORM.then(|| model.vector(id)).flatten();
        NormWeights {
            which,
            w: get(w),
            b: get(b),
        }
    }

    /// `ln_final` of `model`.
    pub fn final_norm(model: &Model<'a>) -> Self {
        let id = TensorId::global;
        NormWeights::load(
            model,
            Which::Final,
            id(TensorKind::LnFinalW),
            id(TensorKind::LnFinalB),
        )
    }
}

/// `ws.normed = norm(ws.resid)` of each row, the norm `w.which`.
#[inline(always)]
pub(crate) fn forward<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    w: &NormWeights<'_>,
    ws: &mut Workspace<'_>,
    rows: Rows,
) {
    rows.each(s, |s, r| normalize(s, w.which, w, ws, r));
}

/// `ws.normed = norm(ws.resid)` of row `r` of the run (at `s.pos`): centre (LN), `hook_scale`, divide, then `* w + b` and `hook_normalized`
/// for LN, or `hook_normalized` then `* w` for RMS (TransformerLens 2.x's placement).
fn normalize<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    which: Which,
    w: &NormWeights<'_>,
    ws: &mut Workspace<'_>,
    r: usize,
) {
    let dm = s.cfg.d_model;
    let out = row(ws.normed, r, dm);
    let n = match crate::features::NORM {
        true => s.cfg.normalization,
        false => Normalization::None,
    };
    // The copy of the residual stream's row, centred, and the scale.
    let mut scale = [norm::scale(n, s.cfg.eps, row(ws.resid, r, dm), out)];
    if !n.is_some() {
        return;
    }
    let (scale_hook, normalized_hook) = which.hooks();
    s.hook(scale_hook, 0, &mut scale);
    norm::divide(n, scale[0], out);
    let rms = matches!(n, Normalization::RMS | Normalization::RMSPre);
    if rms {
        s.hook(normalized_hook, 0, out);
    }
    crate::weights::affine(w.w, w.b, out);
    if !rms {
        s.hook(normalized_hook, 0, out);
    }
}
