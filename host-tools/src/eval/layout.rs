//! Where each activation of one `(kind, layer)` lies in its TransformerLens tensor (without the batch
//! dimension), for a run of `n_pos` positions: `[head, query, key]` for attention rows (zeros above the
//! diagonal, `-inf` for `hook_attn_scores`), `[pos, head, width]` for the other per-head points,
//! `[pos, width]` otherwise.

use microlens::{Config, HookKind};

/// The TransformerLens layout of one `(kind, layer)`'s activations over `n_pos` positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The hook kind.
    pub kind: HookKind,
    /// Its block (0 outside the blocks).
    pub layer: usize,
    /// Heads it is recorded for ([`HookKind::heads`]).
    pub heads: usize,
    /// Values per head and position (`n_pos` for attention rows).
    pub width: usize,
    /// Positions of the run.
    pub n_pos: usize,
}

impl Layout {
    /// The layout of `kind` at `layer` under `cfg`, each activation `width` values long (ignored for
    /// attention rows, which span `n_pos` keys).
    pub fn new(cfg: &Config, kind: HookKind, layer: usize, width: usize, n_pos: usize) -> Self {
        let attention = matches!(kind, HookKind::AttnScores | HookKind::Pattern);
        Layout {
            kind,
            layer,
            heads: kind.heads(cfg),
            width: if attention { n_pos } else { width },
            n_pos,
        }
    }

    /// Whether the activations are attention rows (`[head, query, key]`).
    fn attention(&self) -> bool {
        matches!(self.kind, HookKind::AttnScores | HookKind::Pattern)
    }

    /// TransformerLens's shape of the tensor.
    pub fn shape(&self) -> Vec<usize> {
        if self.attention() {
            vec![self.heads, self.n_pos, self.n_pos]
        } else if self.kind.per_head() {
            vec![self.n_pos, self.heads, self.width]
        } else {
            vec![self.n_pos, self.width]
        }
    }

    /// Values in the tensor: `n_pos · heads · width`.
    pub fn len(&self) -> usize {
        self.n_pos * self.heads * self.width
    }

    /// Whether the tensor holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of what no hook call writes: `-inf` above the diagonal of `hook_attn_scores`, 0 elsewhere.
    pub fn fill(&self) -> f32 {
        if self.kind == HookKind::AttnScores {
            f32::NEG_INFINITY
        } else {
            0.0
        }
    }

    /// The index of the first value of `head`'s activation at `pos` (for attention rows, query `pos`).
    pub fn offset(&self, head: usize, pos: usize) -> usize {
        if self.attention() {
            (head * self.n_pos + pos) * self.width
        } else {
            (pos * self.heads + head) * self.width
        }
    }

    /// Writes `act`, `head`'s activation at `pos`, into `tensor` (one tensor of this layout); `false`
    /// (nothing written) if it does not fit there.
    pub fn write(&self, tensor: &mut [f32], head: usize, pos: usize, act: &[f32]) -> bool {
        if head >= self.heads || pos >= self.n_pos || act.len() > self.width {
            return false;
        }
        let start = self.offset(head, pos);
        match tensor.get_mut(start..start + act.len()) {
            Some(dst) => {
                dst.copy_from_slice(act);
                true
            }
            None => false,
        }
    }
}
