//! The tensor catalogue: which tensors a config has, in which order a blob lists them, and their shapes.
//!
//! Matrices are stored out-major (`[rows = outputs][cols = inputs]`, like `torch.nn.Linear.weight`), so
//! every output is one contiguous dot product: `y[r] = W[r] . x`. TransformerLens keeps `W_Q` as
//! `[head, d_model, d_head]` (right-multiplying); here it is `[head * d_head, d_model]`, row
//! `h * d_head + i` being output `i` of head `h`. Vectors are `[1, n]`.

use core::fmt;

use serde::{Deserialize, Serialize};

use crate::config::{Config, Positional};

/// What a tensor is, independent of its layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TensorKind {
    /// `embed.W_E`, `[d_vocab, d_model]`.
    WE,
    /// `pos_embed.W_pos`, `[n_ctx, d_model]` (standard and shortformer; rotary and sinusoidal have none).
    WPos,
    /// `blocks.L.ln1.w`.
    Ln1W,
    /// `blocks.L.ln1.b`.
    Ln1B,
    /// `blocks.L.attn.W_Q` as `[n_heads * d_head, d_model]`.
    WQ,
    /// `blocks.L.attn.b_Q` as `[1, n_heads * d_head]`.
    BQ,
    /// `blocks.L.attn.W_K` as `[n_key_value_heads * d_head, d_model]` (TransformerLens's `_W_K` with
    /// grouped-query attention).
    WK,
    /// `blocks.L.attn.b_K` as `[1, n_key_value_heads * d_head]` (`_b_K`).
    BK,
    /// `blocks.L.attn.W_V`, as `W_K` (`_W_V`).
    WV,
    /// `blocks.L.attn.b_V`, as `b_K` (`_b_V`).
    BV,
    /// `blocks.L.attn.W_O` as `[d_model, n_heads * d_head]`.
    WO,
    /// `blocks.L.attn.b_O`.
    BO,
    /// Shortformer only: `W_pos @ W_Q`, the positional part of every query, `[n_ctx, n_heads * d_head]`.
    PosQ,
    /// Shortformer only: `W_pos @ W_K`, `[n_ctx, n_key_value_heads * d_head]`.
    PosK,
    /// `blocks.L.ln2.w`.
    Ln2W,
    /// `blocks.L.ln2.b`.
    Ln2B,
    /// Gated MLPs only: `blocks.L.mlp.W_gate` as `[d_mlp, d_model]`.
    WGate,
    /// `blocks.L.mlp.W_in` as `[d_mlp, d_model]`.
    WIn,
    /// `blocks.L.mlp.b_in`.
    BIn,
    /// `blocks.L.mlp.W_out` as `[d_model, d_mlp]`.
    WOut,
    /// `blocks.L.mlp.b_out`.
    BOut,
    /// `ln_final.w`.
    LnFinalW,
    /// `ln_final.b`.
    LnFinalB,
    /// `unembed.W_U` as `[d_vocab_out, d_model]`.
    WU,
    /// `unembed.b_U`.
    BU,
}

/// Per-layer kinds, in blob order.
pub(crate) const LAYER_KINDS: [TensorKind; 19] = [
    TensorKind::Ln1W,
    TensorKind::Ln1B,
    TensorKind::WQ,
    TensorKind::BQ,
    TensorKind::WK,
    TensorKind::BK,
    TensorKind::WV,
    TensorKind::BV,
    TensorKind::WO,
    TensorKind::BO,
    TensorKind::PosQ,
    TensorKind::PosK,
    TensorKind::Ln2W,
    TensorKind::Ln2B,
    TensorKind::WGate,
    TensorKind::WIn,
    TensorKind::BIn,
    TensorKind::WOut,
    TensorKind::BOut,
];
/// Kinds before the layers, in blob order.
pub(crate) const HEAD_KINDS: [TensorKind; 2] = [TensorKind::WE, TensorKind::WPos];
/// Kinds after the layers, in blob order.
pub(crate) const TAIL_KINDS: [TensorKind; 4] = [
    TensorKind::LnFinalW,
    TensorKind::LnFinalB,
    TensorKind::WU,
    TensorKind::BU,
];

impl TensorKind {
    /// Every kind, in declaration (and postcard variant) order: the head, layer and tail kinds.
    pub const ALL: [TensorKind; 25] = {
        let mut all = [TensorKind::WE; 25];
        let mut i = 0;
        while i < all.len() {
            let (h, l) = (HEAD_KINDS.len(), LAYER_KINDS.len());
            all[i] = if i < h {
                HEAD_KINDS[i]
            } else if i < h + l {
                LAYER_KINDS[i - h]
            } else {
                TAIL_KINDS[i - h - l]
            };
            i += 1;
        }
        all
    };

    /// Whether tensors of this kind sit inside a block.
    pub const fn per_layer(self) -> bool {
        !matches!(
            self,
            TensorKind::WE
                | TensorKind::WPos
                | TensorKind::LnFinalW
                | TensorKind::LnFinalB
                | TensorKind::WU
                | TensorKind::BU
        )
    }

    /// Whether this is a matrix (which may be quantised) rather than an `f32` vector.
    pub const fn is_matrix(self) -> bool {
        matches!(
            self,
            TensorKind::WE
                | TensorKind::WPos
                | TensorKind::WQ
                | TensorKind::WK
                | TensorKind::WV
                | TensorKind::WO
                | TensorKind::PosQ
                | TensorKind::PosK
                | TensorKind::WGate
                | TensorKind::WIn
                | TensorKind::WOut
                | TensorKind::WU
        )
    }

    /// Whether the forward pass centres this matrix's input on its mid-range before an integer
    /// product (the MLP's activated hidden vector, `W_out`'s input), and so adds back `c` times its
    /// row sums: what an `I8` blob stores them for.
    pub const fn takes_centred_input(self) -> bool {
        matches!(self, TensorKind::WOut)
    }

    /// Whether a model with `cfg` has this tensor.
    pub fn present(self, cfg: &Config) -> bool {
        let norm = cfg.normalization;
        let mlp = !cfg.attn_only();
        let shortformer = matches!(cfg.positional, Positional::Shortformer);
        match self {
            TensorKind::WPos => cfg.positional.has_table(),
            TensorKind::Ln1W | TensorKind::LnFinalW => norm.has_weight(),
            TensorKind::Ln1B | TensorKind::LnFinalB => norm.has_bias(),
            TensorKind::PosQ | TensorKind::PosK => shortformer,
            TensorKind::Ln2W => mlp && norm.has_weight(),
            TensorKind::Ln2B => mlp && norm.has_bias(),
            TensorKind::WIn | TensorKind::BIn | TensorKind::WOut | TensorKind::BOut => mlp,
            TensorKind::WGate => mlp && cfg.gated_mlp,
            _ => true,
        }
    }

    /// Shape `[rows, cols]` in a blob for `cfg`.
    pub fn shape(self, cfg: &Config) -> [usize; 2] {
        let (d, a, m, kv) = (cfg.d_model, cfg.d_attn(), cfg.d_mlp_or_zero(), cfg.d_kv());
        match self {
            TensorKind::WE => [cfg.d_vocab, d],
            TensorKind::WPos => [cfg.n_ctx, d],
            TensorKind::WQ => [a, d],
            TensorKind::WK | TensorKind::WV => [kv, d],
            TensorKind::BQ => [1, a],
            TensorKind::BK | TensorKind::BV => [1, kv],
            TensorKind::WO => [d, a],
            TensorKind::PosQ => [cfg.n_ctx, a],
            TensorKind::PosK => [cfg.n_ctx, kv],
            TensorKind::WGate | TensorKind::WIn => [m, d],
            TensorKind::BIn => [1, m],
            TensorKind::WOut => [d, m],
            TensorKind::WU => [cfg.d_vocab_out, d],
            TensorKind::BU => [1, cfg.d_vocab_out],
            TensorKind::Ln1W
            | TensorKind::Ln1B
            | TensorKind::BO
            | TensorKind::Ln2W
            | TensorKind::Ln2B
            | TensorKind::BOut
            | TensorKind::LnFinalW
            | TensorKind::LnFinalB => [1, d],
        }
    }

    /// TransformerLens state-dict name, with `{}` standing for the layer.
    pub const fn tl_pattern(self) -> (&'static str, &'static str) {
        match self {
            TensorKind::WE => ("embed.W_E", ""),
            TensorKind::WPos => ("pos_embed.W_pos", ""),
            TensorKind::Ln1W => ("blocks.", ".ln1.w"),
            TensorKind::Ln1B => ("blocks.", ".ln1.b"),
            TensorKind::WQ => ("blocks.", ".attn.W_Q"),
            TensorKind::BQ => ("blocks.", ".attn.b_Q"),
            TensorKind::WK => ("blocks.", ".attn.W_K"),
            TensorKind::BK => ("blocks.", ".attn.b_K"),
            TensorKind::WV => ("blocks.", ".attn.W_V"),
            TensorKind::BV => ("blocks.", ".attn.b_V"),
            TensorKind::WO => ("blocks.", ".attn.W_O"),
            TensorKind::BO => ("blocks.", ".attn.b_O"),
            TensorKind::PosQ => ("blocks.", ".attn.pos_Q"),
            TensorKind::PosK => ("blocks.", ".attn.pos_K"),
            TensorKind::Ln2W => ("blocks.", ".ln2.w"),
            TensorKind::Ln2B => ("blocks.", ".ln2.b"),
            TensorKind::WGate => ("blocks.", ".mlp.W_gate"),
            TensorKind::WIn => ("blocks.", ".mlp.W_in"),
            TensorKind::BIn => ("blocks.", ".mlp.b_in"),
            TensorKind::WOut => ("blocks.", ".mlp.W_out"),
            TensorKind::BOut => ("blocks.", ".mlp.b_out"),
            TensorKind::LnFinalW => ("ln_final.w", ""),
            TensorKind::LnFinalB => ("ln_final.b", ""),
            TensorKind::WU => ("unembed.W_U", ""),
            TensorKind::BU => ("unembed.b_U", ""),
        }
    }
}

/// One tensor of a model: a kind and, for per-layer kinds, its layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorId {
    /// What it is.
    pub kind: TensorKind,
    /// Its block (0 for kinds outside the blocks).
    pub layer: usize,
}

impl TensorId {
    /// A tensor outside the blocks.
    pub const fn global(kind: TensorKind) -> Self {
        TensorId { kind, layer: 0 }
    }
    /// A tensor of block `layer`.
    pub const fn layer(kind: TensorKind, layer: usize) -> Self {
        TensorId { kind, layer }
    }
    /// `kind` as the forward pass meets it in block `layer`: that block's tensor for a per-layer kind,
    /// else the global one.
    pub const fn in_layer(kind: TensorKind, layer: usize) -> Self {
        match kind.per_layer() {
            true => TensorId::layer(kind, layer),
            false => TensorId::global(kind),
        }
    }
    /// Shape `[rows, cols]` in a blob for `cfg`.
    pub fn shape(&self, cfg: &Config) -> [usize; 2] {
        self.kind.shape(cfg)
    }
}

/// Renders the TransformerLens state-dict name, e.g. `blocks.1.attn.W_Q`.
impl fmt::Display for TensorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = self.kind.tl_pattern();
        if self.kind.per_layer() {
            write!(f, "{a}{}{b}", self.layer)
        } else {
            f.write_str(a)
        }
    }
}

/// Where each tensor of a config sits in the blob's tensor table: `slot = head + layer * per_layer + rank`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Catalogue {
    head: [u8; HEAD_KINDS.len()],
    layer: [u8; LAYER_KINDS.len()],
    tail: [u8; TAIL_KINDS.len()],
    n_head: usize,
    per_layer: usize,
    n_layers: usize,
    len: usize,
}

/// Marks a kind the config does not have.
const ABSENT: u8 = u8::MAX;

fn ranks<const N: usize>(kinds: &[TensorKind; N], cfg: &Config) -> ([u8; N], usize) {
    let mut out = [ABSENT; N];
    let mut n = 0;
    for (slot, kind) in out.iter_mut().zip(kinds) {
        if kind.present(cfg) {
            *slot = n as u8;
            n += 1;
        }
    }
    (out, n)
}

impl Catalogue {
    /// The catalogue of `cfg` (which must be valid).
    pub fn new(cfg: &Config) -> Self {
        let (head, n_head) = ranks(&HEAD_KINDS, cfg);
        let (layer, per_layer) = ranks(&LAYER_KINDS, cfg);
        let (tail, n_tail) = ranks(&TAIL_KINDS, cfg);
        Catalogue {
            head,
            layer,
            tail,
            n_head,
            per_layer,
            n_layers: cfg.n_layers,
            len: n_head + per_layer * cfg.n_layers + n_tail,
        }
    }

    /// Number of tensors.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no tensors (never, for a valid config).
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Table slot of `id`, or `None` if the model has no such tensor.
    pub fn slot(&self, id: TensorId) -> Option<usize> {
        // `TensorKind::ALL` lists the head, layer and tail kinds in that order, each kind at its
        // discriminant: its index in its own group is a subtraction, no search.
        let (k, h, l) = (id.kind as usize, HEAD_KINDS.len(), LAYER_KINDS.len());
        let rank = |ranks: &[u8], i: usize| {
            let r = ranks.get(i).copied().filter(|&r| r != ABSENT)?;
            Some(r as usize)
        };
        if k < h {
            rank(&self.head, k)
        } else if k < h + l {
            if id.layer >= self.n_layers {
                return None;
            }
            Some(self.n_head + id.layer * self.per_layer + rank(&self.layer, k - h)?)
        } else {
            let tail = self.n_head + self.n_layers * self.per_layer;
            Some(tail + rank(&self.tail, k - h - l)?)
        }
    }

    /// Every tensor in blob order.
    pub fn ids(&self) -> impl Iterator<Item = TensorId> + '_ {
        let head = HEAD_KINDS
            .iter()
            .zip(self.head)
            .filter(|(_, r)| *r != ABSENT)
            .map(|(k, _)| TensorId::global(*k));
        let layers = (0..self.n_layers).flat_map(move |l| {
            LAYER_KINDS
                .iter()
                .zip(self.layer)
                .filter(|(_, r)| *r != ABSENT)
                .map(move |(k, _)| TensorId::layer(*k, l))
        });
        let tail = TAIL_KINDS
            .iter()
            .zip(self.tail)
            .filter(|(_, r)| *r != ABSENT)
            .map(|(k, _)| TensorId::global(*k));
        head.chain(layers).chain(tail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Normalization;

    #[test]
    fn every_tensor_is_at_its_catalogue_index_and_absent_ones_have_no_slot() {
        let positions = [
            Positional::Standard,
            Positional::Shortformer,
            Positional::Sinusoidal,
        ];
        let norms = [Normalization::LN, Normalization::LNPre, Normalization::RMS];
        for (mlp, positional, normalization) in [None, Some(32)]
            .into_iter()
            .flat_map(|m| positions.into_iter().map(move |p| (m, p)))
            .flat_map(|(m, p)| norms.into_iter().map(move |n| (m, p, n)))
        {
            let mut cfg = Config::new(3, 16, 2, 8, 10, 12, mlp);
            (cfg.positional, cfg.normalization) = (positional, normalization);
            let catalogue = Catalogue::new(&cfg);
            let ids: std::vec::Vec<_> = catalogue.ids().collect();
            assert_eq!(ids.len(), catalogue.len());
            for (index, id) in ids.iter().enumerate() {
                assert_eq!(catalogue.slot(*id), Some(index), "{id}");
            }
            for kind in TensorKind::ALL {
                let at = |layer| catalogue.slot(TensorId::layer(kind, layer));
                if !kind.present(&cfg) {
                    assert_eq!(at(0), None, "{kind:?}");
                }
                if kind.per_layer() {
                    assert_eq!(at(3), None, "{kind:?} past the last layer");
                }
            }
        }
    }
}
