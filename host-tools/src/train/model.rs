//! Transformer in candle (attention-only, or with MLPs: [`Model::with_mlp`]) with TransformerLens's `HookedTransformer` forward pass, parameters
//! stored under TransformerLens names and shapes (right-multiplying, `y = x @ W + b`).

use anyhow::{ensure, Result};
use candle_core::{DType, Device, Tensor, Var};
use microlens::{Normalization, Positional};
use rand::Rng;

use super::causal_softmax::causal_softmax;
use super::layer_norm::{layer_norm, layer_norm_params, LayerNorm};
use super::mlp::Mlp;
use super::params::{constant, normal};
use super::rows::add_rows;

/// Standard deviation of the initial token and positional embeddings (candle's default 1.0 stalls training).
pub const EMBED_INIT_STD: f64 = 0.5;

/// Shape of the model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelConfig {
    /// Number of attention layers.
    pub n_layers: usize,
    /// Residual width.
    pub d_model: usize,
    /// Heads per layer.
    pub n_heads: usize,
    /// Width of one head.
    pub d_head: usize,
    /// Vocabulary size (in and out).
    pub d_vocab: usize,
    /// Context length.
    pub n_ctx: usize,
    /// Positional embedding type (`Standard`, `Shortformer` or `Sinusoidal`).
    pub positional: Positional,
    /// Normalisation type (`None`, or `LN`: TransformerLens LayerNorm,
    /// `(x - mean) / sqrt(mean((x - mean)^2) + eps) * w + b`).
    pub norm: Normalization,
    /// LayerNorm epsilon (TransformerLens default 1e-5).
    pub eps: f64,
}

impl ModelConfig {
    /// Attention scale `sqrt(d_head)`: scores are divided by it.
    pub fn attn_scale(&self) -> f64 {
        (self.d_head as f64).sqrt()
    }

    /// Checks that every size is non-zero.
    pub fn validate(&self) -> Result<()> {
        let dims = [
            self.n_layers,
            self.d_model,
            self.n_heads,
            self.d_head,
            self.d_vocab,
            self.n_ctx,
        ];
        ensure!(
            dims.iter().all(|&d| d > 0),
            "every model dimension must be positive: {self:?}"
        );
        Ok(())
    }
}

/// One attention layer (`blocks.L`).
pub struct Block {
    /// `ln1`, if the model normalises.
    pub ln1: Option<LayerNorm>,
    /// `W_Q [n_heads, d_model, d_head]`.
    pub w_q: Var,
    /// `W_K [n_heads, d_model, d_head]`.
    pub w_k: Var,
    /// `W_V [n_heads, d_model, d_head]`.
    pub w_v: Var,
    /// `W_O [n_heads, d_head, d_model]`.
    pub w_o: Var,
    /// `b_Q [n_heads, d_head]`.
    pub b_q: Var,
    /// `b_K [n_heads, d_head]`.
    pub b_k: Var,
    /// `b_V [n_heads, d_head]`.
    pub b_v: Var,
    /// `b_O [d_model]`.
    pub b_o: Var,
}

/// The trainable model.
pub struct Model {
    /// Its shape.
    pub cfg: ModelConfig,
    /// `embed.W_E [d_vocab, d_model]`.
    pub w_e: Var,
    /// `pos_embed.W_pos [n_ctx, d_model]`; for sinusoidal positions the fixed table of the core's
    /// [`microlens::sinusoidal`] (not trained, not exported).
    pub w_pos: Var,
    /// `blocks.*`.
    pub blocks: Vec<Block>,
    /// `ln_final`, if the model normalises.
    pub ln_final: Option<LayerNorm>,
    /// `unembed.W_U [d_model, d_vocab]`.
    pub w_u: Var,
    /// `unembed.b_U [d_vocab]`.
    pub b_u: Var,
    /// `blocks.*.mlp` (and `ln2`): one per block, or none (attention-only).
    pub mlps: Vec<Mlp>,
}

/// What a forward pass returns.
pub struct Forward {
    /// Logits `[batch, pos, d_vocab]`.
    pub logits: Tensor,
    /// Attention patterns per layer, `[batch, head, query, key]` (TransformerLens `hook_pattern`).
    pub patterns: Vec<Tensor>,
}

/// The sinusoidal positions `[n_ctx, d_model]`, row by row from the core's own function: the values the
/// device adds.
fn sinusoidal_table(n_ctx: usize, d_model: usize) -> Result<Var> {
    let mut data = vec![0.0f32; n_ctx * d_model];
    for (pos, row) in data.chunks_exact_mut(d_model).enumerate() {
        microlens::sinusoidal(pos, row);
    }
    Ok(Var::from_tensor(&Tensor::from_vec(
        data,
        &[n_ctx, d_model],
        &Device::Cpu,
    )?)?)
}

impl Model {
    /// A freshly initialised model, every number drawn from `rng`: embeddings `N(0, 0.5^2)`, weights
    /// `N(0, 1/fan_in)`, biases 0, LayerNorm `w = 1, b = 0`.
    pub fn new(cfg: ModelConfig, rng: &mut impl Rng) -> Result<Self> {
        cfg.validate()?;
        let (d, h, dh, v) = (cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_vocab);
        let w_e = normal(rng, &[v, d], EMBED_INIT_STD)?;
        let w_pos = match cfg.positional {
            Positional::Sinusoidal => sinusoidal_table(cfg.n_ctx, d)?,
            _ => normal(rng, &[cfg.n_ctx, d], EMBED_INIT_STD)?,
        };
        let in_std = 1.0 / (d as f64).sqrt();
        let mut blocks = Vec::with_capacity(cfg.n_layers);
        for _ in 0..cfg.n_layers {
            blocks.push(Block {
                ln1: (cfg.norm == Normalization::LN)
                    .then(|| layer_norm_params(d))
                    .transpose()?,
                w_q: normal(rng, &[h, d, dh], in_std)?,
                w_k: normal(rng, &[h, d, dh], in_std)?,
                w_v: normal(rng, &[h, d, dh], in_std)?,
                w_o: normal(rng, &[h, dh, d], 1.0 / ((h * dh) as f64).sqrt())?,
                b_q: constant(&[h, dh], 0.0)?,
                b_k: constant(&[h, dh], 0.0)?,
                b_v: constant(&[h, dh], 0.0)?,
                b_o: constant(&[d], 0.0)?,
            });
        }
        Ok(Self {
            cfg,
            w_e,
            w_pos,
            blocks,
            ln_final: (cfg.norm == Normalization::LN)
                .then(|| layer_norm_params(d))
                .transpose()?,
            w_u: normal(rng, &[d, v], in_std)?,
            b_u: constant(&[v], 0.0)?,
            mlps: Vec::new(),
        })
    }

    /// [`Model::new`] with an MLP of width `d_mlp` in every block (drawn from `rng` after the rest).
    pub fn with_mlp(cfg: ModelConfig, d_mlp: usize, rng: &mut impl Rng) -> Result<Self> {
        ensure!(d_mlp > 0, "d_mlp must be positive");
        let mut model = Self::new(cfg, rng)?;
        let norm = cfg.norm == Normalization::LN;
        model.mlps = (0..cfg.n_layers)
            .map(|_| Mlp::new(cfg.d_model, d_mlp, norm, rng))
            .collect::<Result<_>>()?;
        Ok(model)
    }

    /// The MLPs' width, `None` for an attention-only model.
    pub fn d_mlp(&self) -> Option<usize> {
        self.mlps.first().map(Mlp::d_mlp)
    }

    /// Every parameter with its TransformerLens state-dict name.
    pub fn named_vars(&self) -> Vec<(String, &Var)> {
        let mut out = vec![("embed.W_E".to_string(), &self.w_e)];
        if self.cfg.positional.has_table() {
            out.push(("pos_embed.W_pos".to_string(), &self.w_pos));
        }
        for (l, b) in self.blocks.iter().enumerate() {
            if let Some(ln) = &b.ln1 {
                out.push((format!("blocks.{l}.ln1.w"), &ln.w));
                out.push((format!("blocks.{l}.ln1.b"), &ln.b));
            }
            let attn = [
                ("W_Q", &b.w_q),
                ("W_K", &b.w_k),
                ("W_V", &b.w_v),
                ("W_O", &b.w_o),
                ("b_Q", &b.b_q),
                ("b_K", &b.b_k),
                ("b_V", &b.b_v),
                ("b_O", &b.b_o),
            ];
            out.extend(
                attn.into_iter()
                    .map(|(n, v)| (format!("blocks.{l}.attn.{n}"), v)),
            );
            if let Some(mlp) = self.mlps.get(l) {
                out.extend(mlp.named_vars(l));
            }
        }
        if let Some(ln) = &self.ln_final {
            out.push(("ln_final.w".to_string(), &ln.w));
            out.push(("ln_final.b".to_string(), &ln.b));
        }
        out.push(("unembed.W_U".to_string(), &self.w_u));
        out.push(("unembed.b_U".to_string(), &self.b_u));
        out
    }

    /// All trainable variables (for the optimiser).
    pub fn vars(&self) -> Vec<Var> {
        self.named_vars()
            .into_iter()
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Number of parameters.
    pub fn n_params(&self) -> usize {
        self.named_vars().iter().map(|(_, v)| v.elem_count()).sum()
    }

    /// HookedTransformer forward pass on `tokens` (`u32 [batch, pos]`, `pos <= n_ctx`).
    pub fn forward(&self, tokens: &Tensor) -> Result<Forward> {
        let (b, t) = tokens.dims2()?;
        ensure!(
            t <= self.cfg.n_ctx,
            "sequence of {t} tokens is longer than n_ctx {}",
            self.cfg.n_ctx
        );
        let d = self.cfg.d_model;
        let w_pos = self.w_pos.narrow(0, 0, t)?; // [t, d]
        let mut resid = self
            .w_e
            .index_select(&tokens.flatten_all()?, 0)?
            .reshape((b, t, d))?;
        if self.cfg.positional.adds_to_residual() {
            resid = add_positions(&resid, &w_pos)?;
        }
        let mut patterns = Vec::with_capacity(self.blocks.len());
        for (l, block) in self.blocks.iter().enumerate() {
            let x = match &block.ln1 {
                Some(ln) => layer_norm(&resid, ln, self.cfg.eps)?,
                None => resid.clone(),
            };
            let xqk = match self.cfg.positional {
                Positional::Standard | Positional::Sinusoidal => x.clone(),
                Positional::Shortformer => add_positions(&x, &w_pos)?,
                Positional::Rotary { .. } => anyhow::bail!("training has no rotary embedding"),
            };
            let q = self.project(&xqk, &block.w_q, &block.b_q)?;
            let k = self.project(&xqk, &block.w_k, &block.b_k)?;
            let v = self.project(&x, &block.w_v, &block.b_v)?;
            // pattern[b,h,i,j] = softmax_{j<=i}(q_i . k_j / sqrt(d_head)), 0 for j > i.
            let pattern = causal_softmax(&q.matmul(&k.t()?)?, self.cfg.attn_scale())?;
            let z = pattern.matmul(&v)?; // [b, h, t, d_head]
                                         // attn_out = sum_h z_h @ W_O[h] + b_O, as one matmul over the flattened (h, d_head) axis.
            let (h, dh) = (self.cfg.n_heads, self.cfg.d_head);
            let z = z.transpose(1, 2)?.reshape((b * t, h * dh))?;
            let out = add_rows(
                &z.matmul(&self.w_o_flat(&block.w_o)?)?,
                block.b_o.as_tensor(),
            )?;
            resid = (resid + out.reshape((b, t, d))?)?;
            if let Some(mlp) = self.mlps.get(l) {
                resid = (&resid + mlp.forward(&resid, self.cfg.eps)?)?;
            }
            patterns.push(pattern);
        }
        if let Some(ln) = &self.ln_final {
            resid = layer_norm(&resid, ln, self.cfg.eps)?;
        }
        let logits = resid.reshape((b * t, d))?.matmul(self.w_u.as_tensor())?;
        let logits = add_rows(&logits, self.b_u.as_tensor())?.reshape((b, t, self.cfg.d_vocab))?;
        Ok(Forward { logits, patterns })
    }

    /// Per-head projection `x @ W[h] + b[h]`: `[b, t, d_model] -> [b, n_heads, t, d_head]`.
    fn project(&self, x: &Tensor, w: &Var, bias: &Var) -> Result<Tensor> {
        let (b, t, d) = x.dims3()?;
        let (h, dh) = (self.cfg.n_heads, self.cfg.d_head);
        // W [h, d, dh] -> [d, h*dh] so all heads are one matmul.
        let w = w.transpose(0, 1)?.contiguous()?.reshape((d, h * dh))?;
        let y = add_rows(&x.reshape((b * t, d))?.matmul(&w)?, &bias.flatten_all()?)?;
        Ok(y.reshape((b, t, h, dh))?.transpose(1, 2)?.contiguous()?)
    }

    /// `W_O [h, d_head, d_model]` viewed as `[h*d_head, d_model]`.
    fn w_o_flat(&self, w_o: &Var) -> Result<Tensor> {
        Ok(w_o.reshape((self.cfg.n_heads * self.cfg.d_head, self.cfg.d_model))?)
    }
}

impl super::Trainable for Model {
    fn logits(&self, tokens: &Tensor) -> Result<Tensor> {
        Ok(self.forward(tokens)?.logits)
    }

    fn vars(&self) -> Vec<Var> {
        Model::vars(self)
    }
}

/// `x [b, t, d] + w_pos [t, d]` for every sequence.
fn add_positions(x: &Tensor, w_pos: &Tensor) -> Result<Tensor> {
    let (b, t, d) = x.dims3()?;
    Ok(add_rows(&x.reshape((b, t * d))?, &w_pos.flatten_all()?)?.reshape((b, t, d))?)
}

/// Copies a variable's values out as `f32`, row-major.
pub fn values(v: &Var) -> Result<Vec<f32>> {
    Ok(v.as_tensor()
        .to_dtype(DType::F32)?
        .flatten_all()?
        .to_vec1()?)
}
