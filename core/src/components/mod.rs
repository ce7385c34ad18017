//! The parts of a forward step, one per file, in the order a token meets them (as TransformerLens's
//! `components/`): embedding, norms, attention, MLP, unembedding. Each takes the [`Step`] (what every
//! part reads: the model, the position, the layer, the hooks), its weights and the workspace, writes into
//! workspace buffers and calls hooks for the current position.

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
