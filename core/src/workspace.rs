//! The activations of one forward step, carved out of one caller-provided `f32` buffer: of one
//! position, or (host, feature `std`) of a run of up to `rows` positions computed layer by layer
//! together, each per-position buffer then `rows` consecutive rows ([`row`]).

use crate::config::{Config, Positional};
use crate::error::Error;

/// Sizes of every activation buffer, in `f32` words: the one place the workspace's length is computed.
/// The per-position buffers (all but the scores, one head's result and the integer scratch) are
/// `rows` times their width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    /// Positions computed together.
    rows: usize,
    /// Residual stream, normalised input, attention output, MLP output, one head's result: `d_model` each.
    d_model: usize,
    /// Q, K, V and Z of all heads: `n_heads * d_head` each.
    d_attn: usize,
    /// Attention scores of one query row.
    n_ctx: usize,
    /// MLP hidden activations.
    d_mlp: usize,
    /// Gated MLPs' second hidden vector (`x W_in`): `d_mlp`, else 0.
    d_gate: usize,
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
    /// The layout for `cfg` and `rows` positions at once.
    const fn new(cfg: &Config, rows: usize) -> Self {
        let rotary = match cfg.positional {
            Positional::Rotary { dim, .. } => dim,
            _ => 0,
        };
        let widest = max(max(cfg.d_model, cfg.d_attn()), cfg.d_mlp_or_zero());
        let quant = widest.div_ceil(4).saturating_mul(3);
        let d_gate = match cfg.gated_mlp {
            true => cfg.d_mlp_or_zero(),
            false => 0,
        };
        // Saturating (a config not validated may hold anything): `usize::MAX` is a length no buffer has.
        let per_row = cfg
            .d_model
            .saturating_mul(4)
            .saturating_add(cfg.d_attn().saturating_mul(4))
            .saturating_add(cfg.d_mlp_or_zero())
            .saturating_add(d_gate)
            .saturating_add(cfg.d_vocab_out)
            .saturating_add(rotary.saturating_mul(2));
        let len = per_row
            .saturating_mul(rows)
            .saturating_add(cfg.d_model)
            .saturating_add(cfg.n_ctx)
            .saturating_add(quant);
        Layout {
            rows,
            d_model: cfg.d_model,
            d_attn: cfg.d_attn(),
            n_ctx: cfg.n_ctx,
            d_mlp: cfg.d_mlp_or_zero(),
            d_gate,
            d_vocab_out: cfg.d_vocab_out,
            rotary,
            quant,
            len,
        }
    }
}

/// Row `r` of a buffer of rows `width` wide: on the host, `buf[r * width..][..width]` (empty if out
/// of range); without `std` a workspace has one row, and this is `buf` itself (no index computed).
#[inline(always)]
pub(crate) fn row(buf: &mut [f32], r: usize, width: usize) -> &mut [f32] {
    #[cfg(feature = "std")]
    {
        let start = r.saturating_mul(width);
        buf.get_mut(start..start.saturating_add(width))
            .unwrap_or(&mut [])
    }
    #[cfg(not(feature = "std"))]
    {
        let _ = (r, width);
        buf
    }
}

/// [`row`] of a shared buffer.
#[inline(always)]
pub(crate) fn row_ref(buf: &[f32], r: usize, width: usize) -> &[f32] {
    #[cfg(feature = "std")]
    {
        let start = r.saturating_mul(width);
        buf.get(start..start.saturating_add(width)).unwrap_or(&[])
    }
    #[cfg(not(feature = "std"))]
    {
        let _ = (r, width);
        buf
    }
}

/// Named, disjoint activation buffers.
#[derive(Debug)]
pub struct Workspace<'b> {
    /// Positions computed together (host only: one without `std`).
    #[cfg(feature = "std")]
    rows: usize,
    /// The residual stream.
    pub(crate) resid: &'b mut [f32],
    /// The output of the current norm.
    pub(crate) normed: &'b mut [f32],
    /// Queries of all heads.
    pub(crate) q: &'b mut [f32],
    /// Keys of all key/value heads at the current position (`d_kv` of its `d_attn` words per row).
    pub(crate) k: &'b mut [f32],
    /// Values of all key/value heads at the current position (likewise).
    pub(crate) v: &'b mut [f32],
    /// Mixed values of all heads.
    pub(crate) z: &'b mut [f32],
    /// One attention row.
    pub(crate) scores: &'b mut [f32],
    /// One head's result (`z_h W_O[h]`).
    pub(crate) head_out: &'b mut [f32],
    /// Attention output.
    pub(crate) attn_out: &'b mut [f32],
    /// MLP hidden activations (gated MLPs: the gate's, then the product).
    pub(crate) mlp: &'b mut [f32],
    /// Gated MLPs' linear hidden activations `x W_in` (empty otherwise).
    pub(crate) gate: &'b mut [f32],
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
        Layout::new(cfg, 1).len
    }

    /// `f32` words of workspace for `rows` positions of `cfg` computed together (host, feature
    /// `std`: `Session::with_rows`); `len_rows(cfg, 1)` is [`Workspace::len`].
    pub const fn len_rows(cfg: &Config, rows: usize) -> usize {
        Layout::new(cfg, rows).len
    }

    /// Positions computed together (the host's batch path, feature `std`).
    #[cfg(feature = "std")]
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Carves the buffers for `rows` positions (1 without `std`) of `cfg` out of `buf`, which must
    /// hold at least [`Workspace::len_rows`] words ([`Workspace::len`] for one).
    pub(crate) fn with_rows(cfg: &Config, rows: usize, buf: &'b mut [f32]) -> Result<Self, Error> {
        #[cfg(not(feature = "std"))]
        let rows = {
            let _ = rows;
            1
        };
        if rows == 0 {
            return Err(Error::OutOfRange { what: "rows" });
        }
        let l = Layout::new(cfg, rows);
        let n = |width: usize| width * rows;
        if buf.len() < l.len {
            return Err(Error::BufferTooSmall {
                what: "workspace",
                needed: l.len,
                found: buf.len(),
            });
        }
        let mut rest = buf;
        Ok(Workspace {
            #[cfg(feature = "std")]
            rows: l.rows,
            resid: take(&mut rest, n(l.d_model)),
            normed: take(&mut rest, n(l.d_model)),
            q: take(&mut rest, n(l.d_attn)),
            k: take(&mut rest, n(l.d_attn)),
            v: take(&mut rest, n(l.d_attn)),
            z: take(&mut rest, n(l.d_attn)),
            scores: take(&mut rest, l.n_ctx),
            head_out: take(&mut rest, l.d_model),
            attn_out: take(&mut rest, n(l.d_model)),
            mlp: take(&mut rest, n(l.d_mlp)),
            gate: take(&mut rest, n(l.d_gate)),
            mlp_out: take(&mut rest, n(l.d_model)),
            logits: take(&mut rest, n(l.d_vocab_out)),
            rot_sin: take(&mut rest, n(l.rotary)),
            rot_cos: take(&mut rest, n(l.rotary)),
            quant: bytemuck::cast_slice_mut(take(&mut rest, l.quant)),
        })
    }
}

/// The integer-only arithmetic's buffers ([`crate::blob::Activations::Integer`]), after the `f32`
/// workspace (which then holds only what hooks see, and the logits).
#[derive(Debug)]
#[cfg_attr(not(feature = "arith-integer"), allow(dead_code))]
pub(crate) struct IntegerBuffers<'b> {
    /// The residual stream, int16 at the plan's residual scale.
    pub resid: &'b mut [i16],
    /// A norm's output in Q11.
    pub normed: &'b mut [i16],
    /// A matmul's exact sums, then its requantised outputs (`i32`).
    pub acc: &'b mut [i32],
    /// The int8 input of the next matmul (`W_O`'s: the mixed values `z` of all heads).
    pub x: &'b mut [i8],
    /// Its 16-bit lanes.
    pub lanes: &'b mut [u32],
    /// Queries of all heads, int8.
    pub q: &'b mut [i8],
    /// One attention row: scores in Q11, then probabilities in Q15.
    pub scores: &'b mut [i32],
    /// A gated MLP's int16 pre-activation while its linear part is computed (empty without one).
    pub hidden: &'b mut [i16],
}

impl<'b> IntegerBuffers<'b> {
    /// Words of each buffer, in order.
    const fn words(cfg: &Config) -> [usize; 8] {
        let widest = max(max(cfg.d_model, cfg.d_attn()), cfg.d_mlp_or_zero());
        let acc = max(widest, cfg.d_vocab_out);
        [
            cfg.d_model.div_ceil(2),
            cfg.d_model.div_ceil(2),
            acc,
            widest.div_ceil(4),
            widest.div_ceil(2),
            cfg.d_attn().div_ceil(4),
            cfg.n_ctx,
            match cfg.gated_mlp {
                true => cfg.d_mlp_or_zero().div_ceil(2),
                false => 0,
            },
        ]
    }

    /// Words the buffers of `cfg` take.
    pub const fn len(cfg: &Config) -> usize {
        let w = Self::words(cfg);
        let mut i = 0;
        let mut total = 0usize;
        while i < w.len() {
            total = total.saturating_add(w[i]);
            i += 1;
        }
        total
    }

    /// The buffers of `cfg` carved out of `buf` (at least [`IntegerBuffers::len`] words).
    pub fn new(cfg: &Config, buf: &'b mut [f32]) -> Result<Self, Error> {
        let needed = Self::len(cfg);
        if buf.len() < needed {
            return Err(Error::BufferTooSmall {
                what: "workspace",
                needed,
                found: buf.len(),
            });
        }
        let [resid, normed, acc, x, lanes, q, scores, hidden] = Self::words(cfg);
        let mut rest = buf;
        Ok(IntegerBuffers {
            resid: &mut bytemuck::cast_slice_mut(take(&mut rest, resid))[..cfg.d_model],
            normed: &mut bytemuck::cast_slice_mut(take(&mut rest, normed))[..cfg.d_model],
            acc: bytemuck::cast_slice_mut(take(&mut rest, acc)),
            x: bytemuck::cast_slice_mut(take(&mut rest, x)),
            lanes: bytemuck::cast_slice_mut(take(&mut rest, lanes)),
            q: bytemuck::cast_slice_mut(take(&mut rest, q)),
            scores: bytemuck::cast_slice_mut(take(&mut rest, scores)),
            hidden: bytemuck::cast_slice_mut(take(&mut rest, hidden)),
        })
    }
}
