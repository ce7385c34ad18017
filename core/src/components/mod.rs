//! The parts of a forward step, one per file, in the order a token meets them (as TransformerLens's
//! `components/`): embedding, norms, attention, MLP, unembedding, and the block that chains a layer's
//! parts. Each has one signature, `forward(s, weights, ws, rows)` (attention and the block take the
//! KV cache too): the [`Step`] (what every part reads: the model, the first position, the layer, the
//! hooks), its weights or input, the workspace, and the [`Rows`] it computes ([`Rows::ONE`] on a
//! device). Each writes into workspace buffers and calls hooks with each row's own position.

pub(crate) mod attention;
pub(crate) mod block;
pub(crate) mod embed;
pub(crate) mod mlp;
pub(crate) mod norm;
pub(crate) mod unembed;

use crate::blob::Activations;
use crate::config::Config;
use crate::hooks::{call, wanted, HookKind, Hooks};
use crate::model::Model;

/// The positions a forward pass computes together: the workspace's rows `0..len`, at positions
/// `s.pos..s.pos + len`. One on a device ([`Rows::ONE`], the constant length 1 without `std`, so
/// every pass over the rows compiles to one); up to the workspace's rows in the host's batch path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rows {
    /// Rows computed (at least 1).
    n: usize,
}

impl Rows {
    /// One position, row 0: a step.
    pub const ONE: Rows = Rows { n: 1 };

    /// `n` positions (at least 1), rows `0..n`.
    #[cfg(feature = "std")]
    pub fn new(n: usize) -> Self {
        Rows { n: n.max(1) }
    }

    /// Number of rows: `n` on the host, the constant 1 without `std`.
    #[inline(always)]
    pub const fn len(self) -> usize {
        if cfg!(feature = "std") {
            self.n
        } else {
            1
        }
    }

    /// Calls `f` with each row `r` in order, the step at that row's position (`s.pos + r`); `s.pos`
    /// is the first position again afterwards.
    #[inline(always)]
    pub fn each<'s, 'a, H: Hooks>(
        self,
        s: &mut Step<'s, 'a, H>,
        mut f: impl FnMut(&mut Step<'s, 'a, H>, usize),
    ) {
        let first = s.pos;
        for r in 0..self.len() {
            s.pos = first + r;
            f(s, r);
        }
        s.pos = first;
    }
}

/// The context of one forward step that every component reads.
pub(crate) struct Step<'s, 'a, H> {
    /// The model.
    pub model: &'s Model<'a>,
    /// Its architecture.
    pub cfg: Config,
    /// Its activation arithmetic.
    pub act: Activations,
    /// The block being computed (ignored by hook points outside the blocks).
    pub layer: usize,
    /// The position of the current token.
    pub pos: usize,
    /// The hooks.
    pub hooks: &'s mut H,
}

impl<'s, 'a, H: Hooks> Step<'s, 'a, H> {
    /// The step at `pos` of `model`, calling `hooks`, starting at layer 0.
    #[inline(always)]
    pub fn new(model: &'s Model<'a>, pos: usize, hooks: &'s mut H) -> Self {
        Step {
            model,
            cfg: *model.config(),
            act: model.activations(),
            layer: 0,
            pos,
            hooks,
        }
    }

    /// Calls the hooks at `kind` (of this layer, for per-layer kinds) and `head` on `act`.
    #[inline(always)]
    pub fn hook(&mut self, kind: HookKind, head: usize, act: &mut [f32]) {
        let layer = if kind.per_layer() { self.layer } else { 0 };
        call(self.hooks, kind, layer, head, self.pos, act);
    }

    /// Whether the hooks are called at `kind` at all.
    #[inline(always)]
    pub fn wants(&self, kind: HookKind) -> bool {
        wanted(self.hooks, kind)
    }
}
