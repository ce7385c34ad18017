//! The candle peer: the shipped model (attention only, LayerNorm before each block and the unembed
//! where the checkpoint has it, learned positions) written the way a candle user writes a decoder:
//! `candle_nn`'s fused LayerNorm, fused QKV projection, preallocated KV cache and fused last-dimension
//! softmax, batched matmuls for the full forward.

use std::path::Path;

use candle_core::{DType, Device, Result, Tensor, D};
use candle_nn::kv_cache::KvCache;
use candle_nn::ops::softmax_last_dim;

/// A LayerNorm's weight and bias (TransformerLens's `eps`).
struct Norm {
    w: Tensor,
    b: Tensor,
}

/// TransformerLens's LayerNorm `eps`.
const EPS: f32 = 1e-5;

impl Norm {
    /// `norm` of the rows of `x`, or `x` itself for a model without norms.
    fn apply(norm: &Option<Norm>, x: &Tensor) -> Result<Tensor> {
        match norm {
            Some(n) => candle_nn::ops::layer_norm(x, &n.w, &n.b, EPS),
            None => Ok(x.clone()),
        }
    }
}

/// One attention block: `qkv = ln1(x) W_qkv + b_qkv` (`[d_model, 3 * d_attn]`), `out = z W_O + b_O`.
struct Layer {
    ln1: Option<Norm>,
    w_qkv: Tensor,
    b_qkv: Tensor,
    w_o: Tensor,
    b_o: Tensor,
}

/// The shipped model's weights as candle tensors (TransformerLens layout, unprocessed).
pub struct Peer {
    w_e: Tensor,
    w_pos: Tensor,
    layers: Vec<Layer>,
    ln_final: Option<Norm>,
    w_u: Tensor,
    b_u: Tensor,
    n_heads: usize,
    d_head: usize,
    /// `1 / attn_scale`.
    inv_scale: f64,
}

impl Peer {
    /// Loads a TransformerLens state dict of an attention-only model (LayerNorm or none).
    pub fn load(path: &Path, n_layers: usize, attn_scale: f64) -> Result<Self> {
        let t = candle_core::safetensors::load(path, &Device::Cpu)?;
        let get = |k: &str| {
            t.get(k)
                .cloned()
                .ok_or_else(|| candle_core::Error::Msg(format!("no tensor {k}")))
        };
        let norm = |prefix: &str| -> Option<Norm> {
            Some(Norm {
                w: t.get(&format!("{prefix}.w"))?.clone(),
                b: t.get(&format!("{prefix}.b"))?.clone(),
            })
        };
        let (n_heads, d_model, d_head) = get("blocks.0.attn.W_Q")?.dims3()?;
        let d_attn = n_heads * d_head;
        // [n_heads, d_model, d_head] -> [d_model, n_heads * d_head]
        let proj = |w: Tensor| w.transpose(0, 1)?.reshape((d_model, d_attn));
        let layers = (0..n_layers)
            .map(|l| {
                let k = |s: &str| get(&format!("blocks.{l}.attn.{s}"));
                let w_qkv =
                    Tensor::cat(&[proj(k("W_Q")?)?, proj(k("W_K")?)?, proj(k("W_V")?)?], 1)?
                        .contiguous()?;
                let b_qkv = Tensor::cat(
                    &[
                        k("b_Q")?.reshape(d_attn)?,
                        k("b_K")?.reshape(d_attn)?,
                        k("b_V")?.reshape(d_attn)?,
                    ],
                    0,
                )?;
                Ok(Layer {
                    ln1: norm(&format!("blocks.{l}.ln1")),
                    w_qkv,
                    b_qkv,
                    w_o: k("W_O")?.reshape((d_attn, d_model))?,
                    b_o: k("b_O")?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Peer {
            w_e: get("embed.W_E")?,
            w_pos: get("pos_embed.W_pos")?,
            layers,
            ln_final: norm("ln_final"),
            w_u: get("unembed.W_U")?,
            b_u: get("unembed.b_U")?,
            n_heads,
            d_head,
            inv_scale: 1.0 / attn_scale,
        })
    }

    /// Decodes `tokens` one at a time (batch 1) over a KV cache, handing each position's logits
    /// (`[1, d_vocab]`) to `each`.
    pub fn decode(&self, tokens: &[u32], mut each: impl FnMut(Tensor)) -> Result<()> {
        let (h, dh) = (self.n_heads, self.d_head);
        let d_attn = h * dh;
        let mut caches: Vec<KvCache> = (0..self.layers.len())
            .map(|_| KvCache::new(1, tokens.len().max(1)))
            .collect();
        for (pos, &t) in tokens.iter().enumerate() {
            let mut x = (self.w_e.narrow(0, t as usize, 1)? + self.w_pos.narrow(0, pos, 1)?)?;
            for (w, cache) in self.layers.iter().zip(caches.iter_mut()) {
                let qkv = Norm::apply(&w.ln1, &x)?
                    .matmul(&w.w_qkv)?
                    .broadcast_add(&w.b_qkv)?;
                // [1, d_attn] -> [h, 1, dh]
                let head = |i: usize| qkv.narrow(1, i * d_attn, d_attn)?.reshape((h, 1, dh));
                let (q, k, v) = (head(0)?, head(1)?, head(2)?);
                let (k, v) = cache.append(&k, &v)?;
                let scores = (q.matmul(&k.t()?)? * self.inv_scale)?;
                let z = softmax_last_dim(&scores)?
                    .matmul(&v)?
                    .reshape((1, d_attn))?;
                x = (x + z.matmul(&w.w_o)?.broadcast_add(&w.b_o)?)?;
            }
            each(
                Norm::apply(&self.ln_final, &x)?
                    .matmul(&self.w_u)?
                    .broadcast_add(&self.b_u)?,
            );
        }
        Ok(())
    }

    /// The logits of every position of a batch of equally long sequences, `[batch * n, d_vocab]`.
    pub fn forward(&self, batch: &[Vec<u32>]) -> Result<Tensor> {
        let (b, n) = (batch.len(), batch.first().map_or(0, Vec::len));
        let (h, dh) = (self.n_heads, self.d_head);
        let d_attn = h * dh;
        let dev = Device::Cpu;
        let ids: Vec<u32> = batch.iter().flatten().copied().collect();
        let ids = Tensor::from_vec(ids, b * n, &dev)?;
        let d_model = self.w_e.dim(1)?;
        let mut x = self
            .w_e
            .index_select(&ids, 0)?
            .reshape((b, n, d_model))?
            .broadcast_add(&self.w_pos.narrow(0, 0, n)?)?
            .reshape((b * n, d_model))?;
        // Causal mask: -inf above the diagonal.
        let mask: Vec<f32> = (0..n * n)
            .map(|i| {
                if i % n > i / n {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
            .collect();
        let mask = Tensor::from_vec(mask, (n, n), &dev)?;
        for w in &self.layers {
            let qkv = Norm::apply(&w.ln1, &x)?
                .matmul(&w.w_qkv)?
                .broadcast_add(&w.b_qkv)?;
            // [b * n, d_attn] -> [b, h, n, dh]
            let heads = |i: usize| {
                qkv.narrow(1, i * d_attn, d_attn)?
                    .reshape((b, n, h, dh))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            let (q, k, v) = (heads(0)?, heads(1)?, heads(2)?);
            let scores = (q.matmul(&k.t()?)? * self.inv_scale)?.broadcast_add(&mask)?;
            let z = softmax_last_dim(&scores)?
                .matmul(&v)?
                .transpose(1, 2)?
                .reshape((b * n, d_attn))?;
            x = (x + z.matmul(&w.w_o)?.broadcast_add(&w.b_o)?)?;
        }
        Norm::apply(&self.ln_final, &x)?
            .matmul(&self.w_u)?
            .broadcast_add(&self.b_u)
    }
}

/// `log_softmax` of the rows of `logits` (`[rows, d_vocab]`), as `f32` rows.
pub fn log_softmax_rows(logits: &Tensor) -> Result<Vec<Vec<f32>>> {
    candle_nn::ops::log_softmax(&logits.to_dtype(DType::F32)?, D::Minus1)?.to_vec2()
}
