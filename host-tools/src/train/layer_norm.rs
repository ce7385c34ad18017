//! TransformerLens's LayerNorm for the trainer: its parameters and its forward.

use anyhow::Result;
use candle_core::{Tensor, Var, D};

use super::params::constant;
use super::rows::{add_rows, mul_rows};

/// LayerNorm parameters `w`, `b` (`[d_model]`).
pub struct LayerNorm {
    /// Scale `w`.
    pub w: Var,
    /// Shift `b`.
    pub b: Var,
}

/// LayerNorm parameters of width `d` initialised as TransformerLens does: `w = 1`, `b = 0`.
pub(crate) fn layer_norm_params(d: usize) -> Result<LayerNorm> {
    Ok(LayerNorm {
        w: constant(&[d], 1.0)?,
        b: constant(&[d], 0.0)?,
    })
}

/// TransformerLens LayerNorm over the last dim: `x -= mean(x)`, `x / sqrt(mean(x^2) + eps) * w + b`.
pub(crate) fn layer_norm(x: &Tensor, ln: &LayerNorm, eps: f64) -> Result<Tensor> {
    let x = x.broadcast_sub(&x.mean_keepdim(D::Minus1)?)?;
    let scale = (x.sqr()?.mean_keepdim(D::Minus1)? + eps)?.sqrt()?;
    let x = mul_rows(&x.broadcast_div(&scale)?, ln.w.as_tensor())?;
    add_rows(&x, ln.b.as_tensor())
}
