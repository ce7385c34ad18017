//! One transformer block: its weights, looked up once per step, and its forward pass
//! `resid += attn(ln1(resid)); resid += mlp(ln2(resid))` with the residual stream's hooks.

use super::attention::AttnWeights;
use super::mlp::MlpWeights;
use super::norm::{NormWeights, Which};
use super::{attention, mlp, norm, Rows, Step};
use crate::error::{Error, Inconsistency};
use crate::features::MLP;
use crate::hooks::{HookKind, Hooks};
use crate::kv_cache::KvCache;
use crate::math::add;
use crate::model::Model;
use crate::tensors::{TensorId, TensorKind};
use crate::workspace::{row, Workspace};

/// Block `s.layer` on the residual stream of the rows: `hook_resid_pre`, `ln1`, attention, the
/// residual add, then (models with MLPs) `hook_resid_mid`, `ln2`, the MLP and its add, and
/// `hook_resid_post`; each part over every row before the next (TransformerLens's order).
#[inline(always)]
pub(crate) fn forward<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    w: &BlockWeights<'_>,
    ws: &mut Workspace<'_>,
    kv: &mut KvCache<'_>,
    rows: Rows,
) {
    let dm = s.cfg.d_model;
    rows.each(s, |s, r| {
        s.hook(HookKind::ResidPre, 0, row(ws.resid, r, dm))
    });
    norm::forward(s, &w.ln1, ws, rows);
    attention::forward(s, &w.attn, ws, kv, rows);
    rows.each(s, |_, r| add(row(ws.resid, r, dm), row(ws.attn_out, r, dm)));
    if let (Some((ln2, mlp_w)), true) = (&w.mlp, MLP) {
        rows.each(s, |s, r| {
            s.hook(HookKind::ResidMid, 0, row(ws.resid, r, dm))
        });
        norm::forward(s, ln2, ws, rows);
        mlp::forward(s, mlp_w, ws, rows);
        rows.each(s, |_, r| add(row(ws.resid, r, dm), row(ws.mlp_out, r, dm)));
    }
    rows.each(s, |s, r| {
        s.hook(HookKind::ResidPost, 0, row(ws.resid, r, dm))
    });
}

/// All weights of one block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockWeights<'a> {
    /// `ln1`.
    pub ln1: NormWeights<'a>,
    /// Attention.
    pub attn: AttnWeights<'a>,
    /// `ln2` and the MLP, for models with MLPs.
    pub mlp: Option<(NormWeights<'a>, MlpWeights<'a>)>,
}

const MISSING: Error = Error::Inconsistent(Inconsistency::MissingTensor);

impl<'a> BlockWeights<'a> {
    /// Looks up the weights of block `layer`.
    pub fn load(model: &Model<'a>, layer: usize) -> Result<Self, Error> {
        let id = |kind| TensorId::layer(kind, layer);
        let m = |kind| model.matrix(id(kind)).ok_or(MISSING);
        let v = |kind| model.vector(id(kind)).ok_or(MISSING);
        let shortformer = |kind| {
            crate::features::SHORTFORMER
                .then(|| model.matrix(id(kind)))
                .flatten()
        };
        let attn = AttnWeights {
            w_q: m(TensorKind::WQ)?,
            b_q: v(TensorKind::BQ)?,
            w_k: m(TensorKind::WK)?,
            b_k: v(TensorKind::BK)?,
            w_v: m(TensorKind::WV)?,
            b_v: v(TensorKind::BV)?,
            w_o: m(TensorKind::WO)?,
            b_o: v(TensorKind::BO)?,
            pos_q: shortformer(TensorKind::PosQ),
            pos_k: shortformer(TensorKind::PosK),
        };
        let ln1 = NormWeights::load(
            model,
            Which::Ln1,
            id(TensorKind::Ln1W),
            id(TensorKind::Ln1B),
        );
        let mlp = if model.config().attn_only() || !crate::features::MLP {
            None
        } else {
            let ln2 = NormWeights::load(
                model,
                Which::Ln2,
                id(TensorKind::Ln2W),
                id(TensorKind::Ln2B),
            );
            let w_gate = match model.config().gated_mlp {
                true => Some(m(TensorKind::WGate)?),
                false => None,
            };
            let mlp = MlpWeights {
                w_gate,
                w_in: m(TensorKind::WIn)?,
                b_in: v(TensorKind::BIn)?,
                w_out: m(TensorKind::WOut)?,
                b_out: v(TensorKind::BOut)?,
            };
            Some((ln2, mlp))
        };
        Ok(BlockWeights { ln1, attn, mlp })
    }
}
