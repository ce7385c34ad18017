//! The activations of one forward step, carved out of one caller-provided `f32` buffer.

use crate::config::{Config, Positional};
use crate::error::Error;

/// Sizes of every activation buffer, in `f32` words: the one place the workspace's length is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// Residual stream, normalised input, attention output, MLP output, one head's result: `d_model` each.
    d_model: usize,
    /// Q, K, V and Z of all heads: `n_heads * d_head` each.
    d_attn: usize,
    /// Attention scores of one query row.
    n_ctx: usize,
    /// MLP hidden activations.
    d_mlp: usize,
    /// Logits.
    d_vocab_out: usize,
    /// Rotary sines and cosines.
    rotary: usize,
    /// int8 activations for W8A8 matmuls, packed four per word, then their 16-bit lanes (two words per
    /// four values, [`crate::quant::Quantized::lanes`]).
    quant: usize,
    /// Total words.
    len: usize,
}

const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

impl Layout {
    /// The layout for `cfg`.
    const fn new(cfg: &Config) -> Self {
        let rotary = match cfg.positional {
            Positional::Rotary { dim, .. } => dim,
            _ => 0,
        };
        let widest = max(max(cfg.d_model, cfg.d_attn()), cfg.d_mlp_or_zero());
        let quant = 3 * widest.div_ceil(4);
        let len = 5 * cfg.d_model
            + 4 * cfg.d_attn()
            + cfg.n_ctx
            + cfg.d_mlp_or_zero()
            + cfg.d_vocab_out
            + 2 * rotary
            + quant;
        Layout {
            d_model: cfg.d_model,
            d_attn: cfg.d_attn(),
            n_ctx: cfg.n_ctx,
            d_mlp: cfg.d_mlp_or_zero(),
            d_vocab_out: cfg.d_vocab_out,
            rotary,
            quant,
            len,
        }
    }
}

/// Named, disjoint activation buffers.
#[derive(Debug)]
pub struct Workspace<'b> {
    /// The residual stream.
    pub(crate) resid: &'b mut [f32],
    /// The output of the current norm.
    pub(crate) normed: &'b mut [f32],
    /// Queries of all heads.
    pub(crate) q: &'b mut [f32],
    /// Keys of all heads at the current position.
    pub(crate) k: &'b mut [f32],
    /// Values of all heads at the current position.
    pub(crate) v: &'b mut [f32],
    /// Mixed values of all heads.
    pub(crate) z: &'b mut [f32],
    /// One attention row.
    pub(crate) scores: &'b mut [f32],
    /// One head's result (`z_h W_O[h]`).
    pub(crate) head_out: &'b mut [f32],
    /// Attention output.
    pub(crate) attn_out: &'b mut [f32],
    /// MLP hidden activations.
    pub(crate) mlp: &'b mut [f32],
    /// MLP output.
    pub(crate) mlp_out: &'b mut [f32],
    /// Logits.
    pub(crate) logits: &'b mut [f32],
    /// Rotary sines at the current position.
    pub(crate) rot_sin: &'b mut [f32],
    /// Rotary cosines at the current position.
    pub(crate) rot_cos: &'b mut [f32],
    /// int8 scratch for quantised activations.
    pub(crate) quant: &'b mut [i8],
}

fn take<'b>(rest: &mut &'b mut [f32], n: usize) -> &'b mut [f32] {
    let (head, tail) = core::mem::take(rest).split_at_mut(n);
    *rest = tail;
    head
}

impl<'b> Workspace<'b> {
    /// `f32` words of workspace a forward step of `cfg` needs. `const`, so a firmware can size a `static`
    /// from a config known at build time.
    pub const fn len(cfg: &Config) -> usize {
        Layout::new(cfg).len
    }

    /// Carves the buffers for `cfg` out of `buf`, which must hold at least [`Workspace::len`] words.
    pub(crate) fn new(cfg: &Config, buf: &'b mut [f32]) -> Result<Self, Error> {
        let l = Layout::new(cfg);
        if buf.len() < l.len {
            return Err(Error::BufferTooSmall {
                what: "workspace",
                needed: l.len,
                found: buf.len(),
            });
        }
        let mut rest = buf;
        Ok(Workspace {
            resid: take(&mut rest, l.d_model),
            normed: take(&mut rest, l.d_model),
            q: take(&mut rest, l.d_attn),
            k: take(&mut rest, l.d_attn),
            v: take(&mut rest, l.d_attn),
            z: take(&mut rest, l.d_attn),
            scores: take(&mut rest, l.n_ctx),
            head_out: take(&mut rest, l.d_model),
            attn_out: take(&mut rest, l.d_model),
            mlp: take(&mut rest, l.d_mlp),
            mlp_out: take(&mut rest, l.d_model),
            logits: take(&mut rest, l.d_vocab_out),
            rot_sin: take(&mut rest, l.rotary),
            rot_cos: take(&mut rest, l.rotary),
            quant: bytemuck::cast_slice_mut(take(&mut rest, l.quant)),
        })
    }
}
