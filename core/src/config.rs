//! Model configuration: the subset of TransformerLens's `HookedTransformerConfig` that decides the maths.
//!
//! Field meanings and defaults follow TransformerLens 2.x. A blob stores the config of the computation it
//! holds: after LayerNorm folding, `normalization` is `LNPre` (or `RMSPre`), as in TransformerLens.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Inconsistency};

/// Largest dimension accepted anywhere in a config (`n_heads * d_head` included): a sum of a few dozen
/// dimensions (the workspace) or `n_layers` times one fits a 32-bit `usize`. Products of two dimensions
/// or more (a matrix, up to 2^40 values; the KV cache, up to 2^49 words) may not: they are computed with
/// checked arithmetic (`DType::data_len`) or saturate at `usize::MAX`, which no buffer holds
/// ([`crate::KvCache::len`], [`crate::analysis::PatternRecorder::len`]).
pub const MAX_DIM: usize = 1 << 20;
/// Largest number of layers accepted.
pub const MAX_LAYERS: usize = 256;

/// MLP activation function (`cfg.act_fn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ActFn {
    /// `max(x, 0)`.
    Relu,
    /// Exact GELU: `0.5 x (1 + erf(x / sqrt 2))` (`F.gelu`).
    Gelu,
    /// GPT-2's tanh approximation: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
    GeluNew,
    /// `0.5 x (1 + tanh(0.7978845608 x (1 + 0.044715 x^2)))`.
    GeluFast,
    /// PyTorch's tanh GELU, the same formula as [`ActFn::GeluNew`].
    GeluPytorchTanh,
    /// `x * sigmoid(x)`.
    Silu,
    /// Softmax linear unit without its LayerNorm: `x * softmax(x)` over the MLP width.
    Solu,
}

impl ActFn {
    /// Every activation function, in declaration order.
    pub const ALL: [ActFn; 7] = [
        ActFn::Relu,
        ActFn::Gelu,
        ActFn::GeluNew,
        ActFn::GeluFast,
        ActFn::GeluPytorchTanh,
        ActFn::Silu,
        ActFn::Solu,
    ];
}

/// Normalisation before attention, MLP and unembedding (`cfg.normalization_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Normalization {
    /// LayerNorm with weight and bias: `(x - mean) / sqrt(var + eps) * w + b`.
    LN,
    /// LayerNorm without parameters (what `fold_ln` leaves).
    LNPre,
    /// RMSNorm with weight: `x / sqrt(mean(x^2) + eps) * w`.
    RMS,
    /// RMSNorm without weight.
    RMSPre,
    /// No normalisation at all.
    None,
}

impl Normalization {
    /// Every normalisation, in declaration order.
    pub const ALL: [Normalization; 5] = [
        Normalization::LN,
        Normalization::LNPre,
        Normalization::RMS,
        Normalization::RMSPre,
        Normalization::None,
    ];
    /// Whether the norm has a weight vector `w`.
    pub const fn has_weight(self) -> bool {
        matches!(self, Normalization::LN | Normalization::RMS)
    }
    /// Whether the norm has a bias vector `b`.
    pub const fn has_bias(self) -> bool {
        matches!(self, Normalization::LN)
    }
    /// Whether the norm subtracts the mean (LayerNorm) rather than only rescaling (RMSNorm).
    pub const fn centers(self) -> bool {
        matches!(self, Normalization::LN | Normalization::LNPre)
    }
    /// Whether there is a norm (and so a `hook_scale`) at all.
    pub const fn is_some(self) -> bool {
        !matches!(self, Normalization::None)
    }
}

/// How positions enter the model (`cfg.positional_embedding_type`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Positional {
    /// `W_pos[pos]` added to the residual stream after the token embedding.
    Standard,
    /// `W_pos[pos]` added after `ln1` to the query and key inputs only, never to the residual stream.
    Shortformer,
    /// Rotary embedding of the first `dim` dimensions of every query and key.
    Rotary {
        /// Number of rotated dimensions per head (`cfg.rotary_dim`, even, at most `d_head`).
        dim: usize,
        /// Frequency base (`cfg.rotary_base`): `freq_i = base^(i / (dim / 2))`.
        base: f32,
        /// GPT-J style adjacent pairs (`cfg.rotary_adjacent_pairs`) instead of NeoX halves.
        adjacent_pairs: bool,
    },
    /// Fixed sinusoids added to the residual stream like `W_pos` (Vaswani et al. 2017), computed on the fly
    /// ([`crate::sinusoidal`]): `PE(pos, 2i) = sin(pos / 10000^(2i / d_model))`, `PE(pos, 2i + 1) = cos(..)`.
    /// An extension of TransformerLens's config (`positional_embedding_type: "sinusoidal"`); no tensor in
    /// the blob. Last variant, so older blobs keep their encoding.
    Sinusoidal,
}

impl Positional {
    /// Whether positions enter the residual stream as a vector added to the embedding (`hook_pos_embed`
    /// then adds to `resid`): learned `W_pos` or sinusoids.
    pub const fn adds_to_residual(self) -> bool {
        matches!(self, Positional::Standard | Positional::Sinusoidal)
    }

    /// Whether the model stores a learned `W_pos` table (standard and shortformer).
    pub const fn has_table(self) -> bool {
        matches!(self, Positional::Standard | Positional::Shortformer)
    }
}

/// The architecture of a model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// Number of transformer blocks.
    pub n_layers: usize,
    /// Width of the residual stream.
    pub d_model: usize,
    /// Attention heads per layer.
    pub n_heads: usize,
    /// Width of one head's query, key and value.
    pub d_head: usize,
    /// Input vocabulary size.
    pub d_vocab: usize,
    /// Output vocabulary size (logits per position).
    pub d_vocab_out: usize,
    /// Maximum context length.
    pub n_ctx: usize,
    /// MLP hidden width; `None` for an attention-only model.
    pub d_mlp: Option<usize>,
    /// MLP activation (ignored when `d_mlp` is `None`).
    pub act_fn: ActFn,
    /// Normalisation type.
    pub normalization: Normalization,
    /// Positional embedding type.
    pub positional: Positional,
    /// Attention scores are divided by this (TransformerLens: `sqrt(d_head)`, or 1 without `use_attn_scale`).
    pub attn_scale: f32,
    /// Also multiply `attn_scale` by `layer + 1` (`cfg.scale_attn_by_inverse_layer_idx`).
    pub scale_attn_by_inverse_layer_idx: bool,
    /// Epsilon of every norm.
    pub eps: f32,
    /// Key/value heads per layer (`cfg.n_key_value_heads`; `n_heads` without grouped-query attention):
    /// query head `h` reads key/value head `h / (n_heads / n_key_value_heads)`.
    pub n_key_value_heads: usize,
    /// Gated MLP (`cfg.gated_mlp`, SwiGLU with `silu`): `out = (act(x W_gate) * (x W_in) + b_in) W_out +
    /// b_out`.
    pub gated_mlp: bool,
}

impl Config {
    /// A config with TransformerLens's defaults for everything but the shape: LN, standard positions,
    /// `attn_scale = sqrt(d_head)`, `eps = 1e-5`, `d_vocab_out = d_vocab`, GELU MLP of width `d_mlp`.
    pub fn new(
        n_layers: usize,
        d_model: usize,
        n_heads: usize,
        d_head: usize,
        d_vocab: usize,
        n_ctx: usize,
        d_mlp: Option<usize>,
    ) -> Self {
        Config {
            n_layers,
            d_model,
            n_heads,
            d_head,
            d_vocab,
            d_vocab_out: d_vocab,
            n_ctx,
            d_mlp,
            act_fn: ActFn::Gelu,
            normalization: Normalization::LN,
            positional: Positional::Standard,
            attn_scale: libm::sqrtf(d_head as f32),
            scale_attn_by_inverse_layer_idx: false,
            eps: 1e-5,
            n_key_value_heads: n_heads,
            gated_mlp: false,
        }
    }

    /// Width of all heads side by side: `n_heads * d_head`.
    pub const fn d_attn(&self) -> usize {
        // Saturating: a config not yet validated may hold anything.
        self.n_heads.saturating_mul(self.d_head)
    }

    /// Width of all key (or value) heads side by side: `n_key_value_heads * d_head`.
    pub const fn d_kv(&self) -> usize {
        self.n_key_value_heads.saturating_mul(self.d_head)
    }

    /// Query heads per key/value head: `n_heads / n_key_value_heads` (1 without grouped-query attention).
    pub const fn kv_group(&self) -> usize {
        match self.n_key_value_heads {
            0 => 1,
            n => self.n_heads / n,
        }
    }

    /// The key/value head query head `head` reads.
    pub const fn kv_head(&self, head: usize) -> usize {
        head / self.kv_group()
    }

    /// Multiply-accumulates of a forward pass over `len` tokens from position 0. Per token and layer:
    /// the query and output projections (`2 d_model d_attn`), the key and value projections (`2
    /// d_model d_kv`), the MLP (`2 d_model d_mlp`, `3` gated) and, at position `p`, the scores and the
    /// mix of every query head over `p + 1` positions (`2 (p + 1) d_attn`); per token the unembedding
    /// (`d_model d_vocab_out`). Saturating, for a config not yet validated.
    pub const fn macs(&self, len: usize) -> u64 {
        let (d_model, d_attn, d_kv) = (
            self.d_model as u64,
            self.d_attn() as u64,
            self.d_kv() as u64,
        );
        let matrices_mlp: u64 = if self.gated_mlp { 3 } else { 2 };
        let projections = 2 * d_model * (d_attn + d_kv);
        let mlp = matrices_mlp * d_model * self.d_mlp_or_zero() as u64;
        let layers = self.n_layers as u64;
        let per_token = layers
            .saturating_mul(projections.saturating_add(mlp))
            .saturating_add(d_model.saturating_mul(self.d_vocab_out as u64));
        let len = len as u64;
        // The sum over p < len of (p + 1) is len (len + 1) / 2, in every layer.
        let attention = (layers * 2 * d_attn).saturating_mul(len * (len + 1) / 2);
        len.saturating_mul(per_token).saturating_add(attention)
    }

    /// Whether the model has no MLPs.
    pub const fn attn_only(&self) -> bool {
        self.d_mlp.is_none()
    }

    /// MLP width, 0 for attention-only models.
    pub const fn d_mlp_or_zero(&self) -> usize {
        match self.d_mlp {
            Some(d) => d,
            None => 0,
        }
    }

    /// Divisor of layer `layer`'s attention scores.
    pub fn layer_attn_scale(&self, layer: usize) -> f32 {
        if self.scale_attn_by_inverse_layer_idx {
            self.attn_scale * (layer + 1) as f32
        } else {
            self.attn_scale
        }
    }

    /// Checks that every dimension is positive and bounded and the options fit together.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |what| Err(Error::Inconsistent(Inconsistency::Config(what)));
        let dims = [
            self.d_model,
            self.n_heads,
            self.d_head,
            self.d_vocab,
            self.d_vocab_out,
            self.n_ctx,
            self.d_attn(),
        ];
        if self.n_layers == 0 || self.n_layers > MAX_LAYERS {
            return bad("n_layers must be in 1..=256");
        }
        if dims.iter().any(|&d| d == 0 || d > MAX_DIM)
            || self.n_heads > MAX_DIM / self.d_head.max(1)
        {
            return bad("a dimension is zero or too large");
        }
        if let Some(d) = self.d_mlp {
            if d == 0 || d > MAX_DIM {
                return bad("d_mlp is zero or too large");
            }
        }
        let kv = self.n_key_value_heads;
        if kv == 0 || kv > self.n_heads || self.n_heads % kv != 0 {
            return bad("n_key_value_heads must divide n_heads");
        }
        if self.gated_mlp && self.d_mlp.is_none() {
            return bad("a gated MLP needs d_mlp");
        }
        if !(self.attn_scale.is_finite() && self.attn_scale != 0.0) {
            return bad("attn_scale must be finite and non-zero");
        }
        if !(self.eps.is_finite() && self.eps >= 0.0) {
            return bad("eps must be finite and non-negative");
        }
        if let Positional::Rotary { dim, base, .. } = self.positional {
            if dim == 0 || dim % 2 != 0 || dim > self.d_head {
                return bad("rotary dim must be even and in 1..=d_head");
            }
            if !(base.is_finite() && base > 0.0) {
                return bad("rotary base must be finite and positive");
            }
        }
        Ok(())
    }

    /// This config with its context capped at `n_ctx` positions (never raised): what a session's KV cache
    /// and workspace are sized for ([`crate::Session::with_context`]). The weights are unchanged.
    pub const fn with_context(mut self, n_ctx: usize) -> Self {
        if n_ctx < self.n_ctx {
            self.n_ctx = n_ctx;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::Config;

    #[test]
    fn macs_count_the_gated_mlp_s_three_matrices_and_the_shared_key_value_heads() {
        // llama2.c's stories260K: 5 layers, d_model 64, 8 heads of 8 over 4 key/value heads, SwiGLU of
        // 172, vocabulary 512. Per token 5 (2 * 64 * (64 + 32) + 3 * 64 * 172) + 64 * 512 = 259,328,
        // and over positions 0-63 the attention's 5 * 2 * 64 * 32.5 = 20,800 on average: llama2.c's
        // run.c is 6.11 instructions per MAC at 1,710,369 per token on this count.
        let mut cfg = Config::new(5, 64, 8, 8, 512, 128, Some(172));
        cfg.n_key_value_heads = 4;
        cfg.gated_mlp = true;
        assert_eq!(cfg.macs(1), 259_328 + 5 * 2 * 64);
        assert_eq!(cfg.macs(64), 64 * 259_328 + 64 * 20_800);
        // Without either: four square projections and two MLP matrices.
        let plain = Config::new(2, 64, 4, 16, 64, 64, Some(256));
        assert_eq!(
            plain.macs(3),
            3 * (2 * (4 * 64 * 64 + 2 * 64 * 256) + 64 * 64) + 2 * 2 * 64 * 6
        );
        // Attention-only, no tokens.
        assert_eq!(Config::new(2, 64, 4, 16, 64, 64, None).macs(0), 0);
    }
}
