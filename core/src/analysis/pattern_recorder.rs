//! Records attention patterns (`hook_pattern` rows) into a caller-provided `[layer][head][query][key]`
//! buffer, zero above the diagonal, like TransformerLens's `cache["pattern", layer]`.

use crate::hooks::{HookKind, HookPoint, Hooks};

/// Records the patterns of layers `first_layer..first_layer + n_layers` for the first `n_pos` positions.
#[derive(Debug)]
pub struct PatternRecorder<'a> {
    buf: &'a mut [f32],
    first_layer: usize,
    n_layers: usize,
    n_heads: usize,
    n_pos: usize,
}

impl<'a> PatternRecorder<'a> {
    /// `f32` words needed for `n_layers` layers of `n_heads` heads over `n_pos` positions:
    /// `n_layers * n_heads * n_pos * n_pos`, or `usize::MAX` (no buffer is that long) if it overflows.
    pub const fn len(n_layers: usize, n_heads: usize, n_pos: usize) -> usize {
        match n_pos.checked_mul(n_pos) {
            Some(square) => n_layers.saturating_mul(n_heads).saturating_mul(square),
            None if n_layers == 0 || n_heads == 0 => 0,
            None => usize::MAX,
        }
    }

    /// A recorder into `buf` (zeroed here) of layers `first_layer..first_layer + n_layers`; rows and
    /// columns past `n_pos` are not recorded. Returns `None` if `buf` is shorter than [`PatternRecorder::len`].
    pub fn new(
        buf: &'a mut [f32],
        first_layer: usize,
        n_layers: usize,
        n_heads: usize,
        n_pos: usize,
    ) -> Option<Self> {
        let len = Self::len(n_layers, n_heads, n_pos);
        let buf = buf.get_mut(..len)?;
        buf.fill(0.0);
        Some(PatternRecorder {
            buf,
            first_layer,
            n_layers,
            n_heads,
            n_pos,
        })
    }

    fn offset(&self, layer: usize, head: usize) -> Option<usize> {
        let l = layer.checked_sub(self.first_layer)?;
        (l < self.n_layers && head < self.n_heads)
            .then(|| (l * self.n_heads + head) * self.n_pos * self.n_pos)
    }

    /// The `[query][key]` pattern of a recorded head, `n_pos * n_pos` row-major.
    pub fn pattern(&self, layer: usize, head: usize) -> Option<&[f32]> {
        let o = self.offset(layer, head)?;
        self.buf.get(o..o + self.n_pos * self.n_pos)
    }

    /// Attention of `query` to `key` in a recorded head (0 if not recorded).
    pub fn get(&self, layer: usize, head: usize, query: usize, key: usize) -> f32 {
        if query >= self.n_pos || key >= self.n_pos {
            return 0.0;
        }
        self.pattern(layer, head)
            .map_or(0.0, |p| p[query * self.n_pos + key])
    }

    /// Recorded positions per side.
    pub fn n_pos(&self) -> usize {
        self.n_pos
    }
}

impl Hooks for PatternRecorder<'_> {
    #[inline]
    fn wants(&self, kind: HookKind) -> bool {
        kind == HookKind::Pattern
    }

    fn hook(&mut self, p: HookPoint, row: &mut [f32]) {
        if p.kind != HookKind::Pattern || p.pos >= self.n_pos {
            return;
        }
        if let Some(o) = self.offset(p.layer, p.head) {
            let start = o + p.pos * self.n_pos;
            let n = row.len().min(self.n_pos);
            self.buf[start..start + n].copy_from_slice(&row[..n]);
        }
    }
}
