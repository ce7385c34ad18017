//! The weights of one transformer block, looked up once per step.

use crate::error::{Error, Inconsistency};
use crate::model::Model;
use crate::tensors::{TensorId, TensorKind};
use crate::weights::{Matrix, Vector};

/// Norm parameters (absent for parameter-free norms).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NormWeights<'a> {
    /// Weight `w`.
    pub w: Option<Vector<'a>>,
    /// Bias `b`.
    pub b: Option<Vector<'a>>,
}

impl<'a> NormWeights<'a> {
    /// The tensors `w` and `b` of `model`, looked up only with norms compiled in (without them
    /// `norm::forward` reads none, and the lookups would only cost code and time).
    pub fn load(model: &Model<'a>, w: TensorId, b: TensorId) -> Self {
        let get = |id| crate::features::NORM.then(|| model.vector(id)).flatten();
        NormWeights {
            w: get(w),
            b: get(b),
        }
    }

    /// `ln_final` of `model`.
    pub fn final_norm(model: &Model<'a>) -> Self {
        let id = TensorId::global;
        NormWeights::load(model, id(TensorKind::LnFinalW), id(TensorKind::LnFinalB))
    }
}

/// Attention weights of one block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttnWeights<'a> {
    /// `W_Q`, `[n_heads * d_head, d_model]`.
    pub w_q: Matrix<'a>,
    /// `b_Q`.
    pub b_q: Vector<'a>,
    /// `W_K`, `[n_key_value_heads * d_head, d_model]`.
    pub w_k: Matrix<'a>,
    /// `b_K`.
    pub b_k: Vector<'a>,
    /// `W_V`.
    pub w_v: Matrix<'a>,
    /// `b_V`.
    pub b_v: Vector<'a>,
    /// `W_O`, `[d_model, n_heads * d_head]`.
    pub w_o: Matrix<'a>,
    /// `b_O`.
    pub b_o: Vector<'a>,
    /// Shortformer positional queries `W_pos W_Q`.
    pub pos_q: Option<Matrix<'a>>,
    /// Shortformer positional keys `W_pos W_K`.
    pub pos_k: Option<Matrix<'a>>,
}

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
        let ln1 = NormWeights::load(model, id(TensorKind::Ln1W), id(TensorKind::Ln1B));
        let mlp = if model.config().attn_only() || !crate::features::MLP {
            None
        } else {
            let ln2 = NormWeights::load(model, id(TensorKind::Ln2W), id(TensorKind::Ln2B));
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
