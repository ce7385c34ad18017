//! The MLP of a trainable block (TransformerLens's `MLP` with `act_fn = "gelu_new"`):
//! `out = gelu_new(ln2(resid) @ W_in + b_in) @ W_out + b_out`. Models without MLPs (the induction model)
//! have none; the fact model (`microlens train-facts`) has one per block.

use anyhow::Result;
use candle_core::{Tensor, Var};
use rand::Rng;
use serde_json::{json, Value};

use super::layer_norm::{layer_norm, layer_norm_params, LayerNorm};
use super::params::{constant, normal};

/// One block's MLP (`blocks.L.mlp`, and `blocks.L.ln2` if the model normalises).
pub struct Mlp {
    /// `ln2`, if the model normalises.
    pub ln2: Option<LayerNorm>,
    /// `W_in [d_model, d_mlp]`.
    pub w_in: Var,
    /// `b_in [d_mlp]`.
    pub b_in: Var,
    /// `W_out [d_mlp, d_model]`.
    pub w_out: Var,
    /// `b_out [d_model]`.
    pub b_out: Var,
}

impl Mlp {
    /// A fresh MLP: weights `N(0, 1/fan_in)`, biases 0, LayerNorm `w = 1, b = 0` if `norm`.
    pub fn new(d_model: usize, d_mlp: usize, norm: bool, rng: &mut impl Rng) -> Result<Self> {
        Ok(Mlp {
            ln2: norm.then(|| layer_norm_params(d_model)).transpose()?,
            w_in: normal(rng, &[d_model, d_mlp], 1.0 / (d_model as f64).sqrt())?,
            b_in: constant(&[d_mlp], 0.0)?,
            w_out: normal(rng, &[d_mlp, d_model], 1.0 / (d_mlp as f64).sqrt())?,
            b_out: constant(&[d_model], 0.0)?,
        })
    }

    /// Hidden width `d_mlp`.
    pub fn d_mlp(&self) -> usize {
        self.b_in.dims()[0]
    }

    /// The MLP's output for `resid [batch, pos, d_model]`.
    pub fn forward(&self, resid: &Tensor, eps: f64) -> Result<Tensor> {
        let (b, t, d) = resid.dims3()?;
        let x = match &self.ln2 {
            Some(ln) => layer_norm(resid, ln, eps)?,
            None => resid.clone(),
        };
        let post = x
            .reshape((b * t, d))?
            .matmul(self.w_in.as_tensor())?
            .broadcast_add(self.b_in.as_tensor())?
            .gelu()?; // candle's `gelu` is the tanh approximation: TransformerLens's `gelu_new`
        Ok(post
            .matmul(self.w_out.as_tensor())?
            .broadcast_add(self.b_out.as_tensor())?
            .reshape((b, t, d))?)
    }

    /// Its parameters under their TransformerLens names in block `layer`.
    pub fn named_vars(&self, layer: usize) -> Vec<(String, &Var)> {
        let mut out = Vec::new();
        if let Some(ln) = &self.ln2 {
            out.push((format!("blocks.{layer}.ln2.w"), &ln.w));
            out.push((format!("blocks.{layer}.ln2.b"), &ln.b));
        }
        let mlp = [
            ("W_in", &self.w_in),
            ("b_in", &self.b_in),
            ("W_out", &self.w_out),
            ("b_out", &self.b_out),
        ];
        out.extend(
            mlp.into_iter()
                .map(|(n, v)| (format!("blocks.{layer}.mlp.{n}"), v)),
        );
        out
    }
}

/// Sets the MLP keys of a TransformerLens config dict (`d_mlp`, `act_fn`, `attn_only`) and adds the
/// MLP weights to `n_params`.
pub fn set_tl_config(config: &mut Value, n_layers: usize, d_model: usize, d_mlp: usize) {
    config["d_mlp"] = json!(d_mlp);
    config["act_fn"] = json!("gelu_new");
    config["attn_only"] = json!(false);
    let attn = config["n_params"].as_u64().unwrap_or(0) as usize;
    config["n_params"] = json!(attn + n_layers * 2 * d_model * d_mlp);
}
