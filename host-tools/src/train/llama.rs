//! A LLaMA-family transformer in candle, with TransformerLens's `HookedTransformer` forward pass for
//! `normalization_type="RMS"`, rotary positions (GPT-NeoX halves, `rotary_adjacent_pairs=False`),
//! grouped-query attention (`n_key_value_heads`) and a gated MLP (SwiGLU, `act_fn="silu"`), without
//! biases and with untied embeddings: llama2.c's stories models' shape. Parameters are stored under
//! TransformerLens names and shapes (right-multiplying, `y = x @ W`); the biases TransformerLens keeps
//! for these models are exported as zeros.

use anyhow::{bail, ensure, Result};
use candle_core::{Device, Tensor, Var, D};
use rand::Rng;
use serde_json::{json, Value};

use super::causal_softmax::causal_softmax;
use super::model::EMBED_INIT_STD;
use super::params::{constant, normal};
use super::rows::mul_rows;
use super::Trainable;

/// Shape of a LLaMA-family model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Blocks.
    pub n_layers: usize,
    /// Residual width.
    pub d_model: usize,
    /// Query heads per block.
    pub n_heads: usize,
    /// Key/value heads per block (divides `n_heads`).
    pub n_kv_heads: usize,
    /// Width of one head (even: rotary pairs its halves).
    pub d_head: usize,
    /// Hidden width of the gated MLP.
    pub d_mlp: usize,
    /// Vocabulary (in and out).
    pub d_vocab: usize,
    /// Context length.
    pub n_ctx: usize,
    /// Rotary base `theta`.
    pub rotary_base: f64,
    /// RMSNorm epsilon.
    pub eps: f64,
}

impl LlamaConfig {
    /// llama2.c's `stories260K` shape (dim 64, 5 layers, 8 heads, 4 key/value heads, hidden 172,
    /// vocabulary 512) at context `n_ctx`.
    pub fn stories260k(n_ctx: usize) -> Self {
        LlamaConfig {
            n_layers: 5,
            d_model: 64,
            n_heads: 8,
            n_kv_heads: 4,
            d_head: 8,
            d_mlp: 172,
            d_vocab: 512,
            n_ctx,
            rotary_base: 10000.0,
            eps: 1e-5,
        }
    }

    /// Checks every size: positive, `n_kv_heads` dividing `n_heads`, `d_head` even, and at most
    /// 2^28 parameters (the trainer's memory holds a few copies of each).
    pub fn validate(&self) -> Result<()> {
        let dims = [
            ("n_layers", self.n_layers),
            ("d_model", self.d_model),
            ("n_heads", self.n_heads),
            ("n_kv_heads", self.n_kv_heads),
            ("d_head", self.d_head),
            ("d_mlp", self.d_mlp),
            ("d_vocab", self.d_vocab),
            ("n_ctx", self.n_ctx),
        ];
        if let Some((name, d)) = dims.iter().find(|(_, d)| !(1..=1 << 20).contains(d)) {
            bail!("{name} {d} is outside 1..=2^20");
        }
        ensure!(
            self.n_heads % self.n_kv_heads == 0,
            "n_kv_heads {} must divide n_heads {}",
            self.n_kv_heads,
            self.n_heads
        );
        ensure!(self.d_head % 2 == 0, "d_head {} must be even", self.d_head);
        ensure!(
            self.n_params() <= 1 << 28,
            "{} parameters: more than the trainer's limit of 2^28",
            self.n_params()
        );
        Ok(())
    }

    /// Number of trained parameters: embeddings, attention, gated MLPs and norm weights.
    pub fn n_params(&self) -> usize {
        let (d, v) = (self.d_model, self.d_vocab);
        let attn = d * self.d_head * (2 * self.n_heads + 2 * self.n_kv_heads);
        let block = attn + 3 * d * self.d_mlp + 2 * d;
        (2 * v * d + d).saturating_add(self.n_layers.saturating_mul(block))
    }

    /// Attention scale `sqrt(d_head)`: scores are divided by it.
    pub fn attn_scale(&self) -> f64 {
        (self.d_head as f64).sqrt()
    }

    /// Query heads per key/value head.
    fn group(&self) -> usize {
        self.n_heads / self.n_kv_heads
    }
}

/// One block (`blocks.L`).
pub struct LlamaBlock {
    /// `ln1.w [d_model]`.
    pub ln1: Var,
    /// `attn.W_Q [n_heads, d_model, d_head]`.
    pub w_q: Var,
    /// `attn._W_K [n_kv_heads, d_model, d_head]`.
    pub w_k: Var,
    /// `attn._W_V [n_kv_heads, d_model, d_head]`.
    pub w_v: Var,
    /// `attn.W_O [n_heads, d_head, d_model]`.
    pub w_o: Var,
    /// `ln2.w [d_model]`.
    pub ln2: Var,
    /// `mlp.W_gate [d_model, d_mlp]`.
    pub w_gate: Var,
    /// `mlp.W_in [d_model, d_mlp]`.
    pub w_in: Var,
    /// `mlp.W_out [d_mlp, d_model]`.
    pub w_out: Var,
}

/// The trainable LLaMA-family model.
pub struct Llama {
    /// Its shape.
    pub cfg: LlamaConfig,
    /// `embed.W_E [d_vocab, d_model]`.
    pub w_e: Var,
    /// `blocks.*`.
    pub blocks: Vec<LlamaBlock>,
    /// `ln_final.w [d_model]`.
    pub ln_final: Var,
    /// `unembed.W_U [d_model, d_vocab]`.
    pub w_u: Var,
    /// Rotary tables `cos` and `sin`, `[n_ctx, d_head]` (not trained).
    rotary: (Tensor, Tensor),
}

impl Llama {
    /// A freshly initialised model, every number drawn from `rng`: `W_E ~ N(0, 0.5^2)`, weights
    /// `N(0, 1/fan_in)` (the output projections also divided by `sqrt(2 n_layers)`), norm weights 1.
    pub fn new(cfg: LlamaConfig, rng: &mut impl Rng) -> Result<Self> {
        cfg.validate()?;
        let (d, h, g, dh, m) = (
            cfg.d_model,
            cfg.n_heads,
            cfg.n_kv_heads,
            cfg.d_head,
            cfg.d_mlp,
        );
        let w_e = normal(rng, &[cfg.d_vocab, d], EMBED_INIT_STD)?;
        let fan_in = |n: usize| 1.0 / (n as f64).sqrt();
        let depth = 1.0 / (2.0 * cfg.n_layers as f64).sqrt();
        let mut blocks = Vec::with_capacity(cfg.n_layers);
        for _ in 0..cfg.n_layers {
            blocks.push(LlamaBlock {
                ln1: constant(&[d], 1.0)?,
                w_q: normal(rng, &[h, d, dh], fan_in(d))?,
                w_k: normal(rng, &[g, d, dh], fan_in(d))?,
                w_v: normal(rng, &[g, d, dh], fan_in(d))?,
                w_o: normal(rng, &[h, dh, d], fan_in(h * dh) * depth)?,
                ln2: constant(&[d], 1.0)?,
                w_gate: normal(rng, &[d, m], fan_in(d))?,
                w_in: normal(rng, &[d, m], fan_in(d))?,
                w_out: normal(rng, &[m, d], fan_in(m) * depth)?,
            });
        }
        Ok(Llama {
            cfg,
            w_e,
            blocks,
            ln_final: constant(&[d], 1.0)?,
            w_u: normal(rng, &[d, cfg.d_vocab], fan_in(d))?,
            rotary: rotary_tables(&cfg)?,
        })
    }

    /// Every parameter with its TransformerLens state-dict name (grouped-query keys and values as
    /// TransformerLens names them, `attn._W_K` and `attn._W_V`).
    pub fn named_vars(&self) -> Vec<(String, &Var)> {
        let mut out = vec![("embed.W_E".to_string(), &self.w_e)];
        for (l, b) in self.blocks.iter().enumerate() {
            let leaves = [
                ("ln1.w", &b.ln1),
                ("attn.W_Q", &b.w_q),
                ("attn._W_K", &b.w_k),
                ("attn._W_V", &b.w_v),
                ("attn.W_O", &b.w_o),
                ("ln2.w", &b.ln2),
                ("mlp.W_gate", &b.w_gate),
                ("mlp.W_in", &b.w_in),
                ("mlp.W_out", &b.w_out),
            ];
            out.extend(
                leaves
                    .into_iter()
                    .map(|(n, v)| (format!("blocks.{l}.{n}"), v)),
            );
        }
        out.push(("ln_final.w".to_string(), &self.ln_final));
        out.push(("unembed.W_U".to_string(), &self.w_u));
        out
    }

    /// The biases TransformerLens's state dict has for this model, all zero: name and shape.
    pub fn zero_biases(&self) -> Vec<(String, Vec<usize>)> {
        let c = &self.cfg;
        let mut out = Vec::new();
        for l in 0..c.n_layers {
            out.push((format!("blocks.{l}.attn.b_Q"), vec![c.n_heads, c.d_head]));
            out.push((
                format!("blocks.{l}.attn._b_K"),
                vec![c.n_kv_heads, c.d_head],
            ));
            out.push((
                format!("blocks.{l}.attn._b_V"),
                vec![c.n_kv_heads, c.d_head],
            ));
            out.push((format!("blocks.{l}.attn.b_O"), vec![c.d_model]));
            out.push((format!("blocks.{l}.mlp.b_in"), vec![c.d_mlp]));
            out.push((format!("blocks.{l}.mlp.b_out"), vec![c.d_model]));
        }
        out.push(("unembed.b_U".to_string(), vec![c.d_vocab]));
        out
    }

    /// The model's `HookedTransformerConfig` as TransformerLens 2.x's `to_dict()` gives the keys that
    /// decide the maths (the form [`super::export::tl_config`] writes for the other models).
    pub fn tl_config(&self, name: &str, seed: u64) -> Value {
        let c = &self.cfg;
        json!({
            "n_layers": c.n_layers,
            "d_model": c.d_model,
            "n_ctx": c.n_ctx,
            "d_head": c.d_head,
            "model_name": name,
            "n_heads": c.n_heads,
            "n_key_value_heads": c.n_kv_heads,
            "d_mlp": c.d_mlp,
            "act_fn": "silu",
            "gated_mlp": true,
            "d_vocab": c.d_vocab,
            "d_vocab_out": c.d_vocab,
            "eps": c.eps,
            "use_attn_scale": true,
            "attn_scale": c.attn_scale(),
            "scale_attn_by_inverse_layer_idx": false,
            "original_architecture": "LlamaForCausalLM",
            "tokenizer_name": null,
            "normalization_type": "RMS",
            "final_rms": true,
            "attention_dir": "causal",
            "attn_only": false,
            "positional_embedding_type": "rotary",
            "rotary_dim": c.d_head,
            "rotary_base": c.rotary_base,
            "rotary_adjacent_pairs": false,
            "parallel_attn_mlp": false,
            "tie_word_embeddings": false,
            "init_mode": "gpt2",
            "initializer_range": 0.8 / (c.d_model as f64).sqrt(),
            "seed": seed,
            "n_params": c.n_layers * c.d_model * (4 * c.d_head * c.n_heads + 3 * c.d_mlp),
            "default_prepend_bos": true,
            "device": "cpu",
        })
    }

    /// `x / sqrt(mean(x^2) + eps) * w` over the last dim (TransformerLens's `RMSNorm`).
    fn rms_norm(&self, x: &Tensor, w: &Var) -> Result<Tensor> {
        let scale = (x.sqr()?.mean_keepdim(D::Minus1)? + self.cfg.eps)?.sqrt()?;
        mul_rows(&x.broadcast_div(&scale)?, w.as_tensor())
    }

    /// `x @ W[h]` for every head of `w [heads, d_model, d_head]`: `[b, t, d] -> [b, heads, t, d_head]`.
    fn heads(&self, x: &Tensor, w: &Var) -> Result<Tensor> {
        let (b, t, d) = x.dims3()?;
        let (heads, _, dh) = w.dims3()?;
        let w = w.transpose(0, 1)?.contiguous()?.reshape((d, heads * dh))?;
        let y = x.reshape((b * t, d))?.matmul(&w)?;
        Ok(y.reshape((b, t, heads, dh))?
            .transpose(1, 2)?
            .contiguous()?)
    }

    /// Rotary positions on `x [b, heads, t, d_head]`: `x cos + rotate_half(x) sin`, with
    /// `rotate_half([x1, x2]) = [-x2, x1]`.
    fn rotate(&self, x: &Tensor) -> Result<Tensor> {
        let (b, h, t, dh) = x.dims4()?;
        let half = dh / 2;
        let turned = Tensor::cat(
            &[
                &x.narrow(D::Minus1, half, half)?.neg()?,
                &x.narrow(D::Minus1, 0, half)?,
            ],
            D::Minus1,
        )?;
        let (cos, sin) = &self.rotary;
        let table = |m: &Tensor| m.narrow(0, 0, t)?.flatten_all();
        let rows = (b * h, t * dh);
        let a = mul_rows(&x.reshape(rows)?, &table(cos)?)?;
        let c = mul_rows(&turned.reshape(rows)?, &table(sin)?)?;
        Ok((a + c)?.reshape((b, h, t, dh))?)
    }

    /// Each key/value head repeated for the query heads that share it: `[b, g, t, dh] -> [b, h, t, dh]`,
    /// query head `h` reading key/value head `h / (n_heads / n_kv_heads)`.
    fn share(&self, x: &Tensor) -> Result<Tensor> {
        let group = self.cfg.group();
        if group == 1 {
            return Ok(x.clone());
        }
        let (b, g, t, dh) = x.dims4()?;
        Ok(x.unsqueeze(2)?
            .expand((b, g, group, t, dh))?
            .contiguous()?
            .reshape((b, g * group, t, dh))?)
    }

    /// HookedTransformer's forward pass on `tokens` (`u32 [batch, pos]`, `pos <= n_ctx`): the logits
    /// `[batch, pos, d_vocab]`.
    pub fn forward(&self, tokens: &Tensor) -> Result<Tensor> {
        let (b, t) = tokens.dims2()?;
        let c = &self.cfg;
        ensure!(
            t <= c.n_ctx,
            "sequence of {t} tokens is longer than n_ctx {}",
            c.n_ctx
        );
        let d = c.d_model;
        let mut resid = self
            .w_e
            .index_select(&tokens.flatten_all()?, 0)?
            .reshape((b, t, d))?;
        for block in &self.blocks {
            let x = self.rms_norm(&resid, &block.ln1)?;
            let q = self.rotate(&self.heads(&x, &block.w_q)?)?;
            let k = self.share(&self.rotate(&self.heads(&x, &block.w_k)?)?)?;
            let v = self.share(&self.heads(&x, &block.w_v)?)?;
            // pattern[b,h,i,j] = softmax_{j<=i}(q_i . k_j / sqrt(d_head)), 0 for j > i.
            let pattern = causal_softmax(&q.matmul(&k.t()?)?, c.attn_scale())?;
            let z = pattern
                .matmul(&v)?
                .transpose(1, 2)?
                .reshape((b * t, c.n_heads * c.d_head))?;
            let w_o = block.w_o.reshape((c.n_heads * c.d_head, d))?;
            resid = (resid + z.matmul(&w_o)?.reshape((b, t, d))?)?;
            let x = self.rms_norm(&resid, &block.ln2)?.reshape((b * t, d))?;
            let gate = x.matmul(block.w_gate.as_tensor())?.silu()?;
            let post = (gate * x.matmul(block.w_in.as_tensor())?)?;
            let out = post.matmul(block.w_out.as_tensor())?.reshape((b, t, d))?;
            resid = (resid + out)?;
        }
        let x = self.rms_norm(&resid, &self.ln_final)?.reshape((b * t, d))?;
        Ok(x.matmul(self.w_u.as_tensor())?.reshape((b, t, c.d_vocab))?)
    }
}

impl Trainable for Llama {
    fn logits(&self, tokens: &Tensor) -> Result<Tensor> {
        self.forward(tokens)
    }

    fn vars(&self) -> Vec<Var> {
        self.named_vars()
            .into_iter()
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// TransformerLens's rotary tables `[n_ctx, d_head]` for the halves layout: `angle[p, i] = p /
/// base^(j / (d_head / 2))` with `j = i mod d_head / 2`.
fn rotary_tables(cfg: &LlamaConfig) -> Result<(Tensor, Tensor)> {
    let (n, dh) = (cfg.n_ctx, cfg.d_head);
    let half = dh / 2;
    let mut cos = Vec::with_capacity(n * dh);
    let mut sin = Vec::with_capacity(n * dh);
    for p in 0..n {
        for i in 0..dh {
            let freq = cfg.rotary_base.powf((i % half) as f64 / half as f64);
            let angle = p as f64 / freq;
            cos.push(angle.cos() as f32);
            sin.push(angle.sin() as f32);
        }
    }
    let tensor = |v: Vec<f32>| Tensor::from_vec(v, (n, dh), &Device::Cpu);
    Ok((tensor(cos)?, tensor(sin)?))
}
