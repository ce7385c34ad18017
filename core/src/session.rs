//! A decoding session: the forward pass, one token at a time, over a KV cache. Read top to bottom;
//! the host's batch path ([`batch`], `std`) runs the same pass over several positions at once.

#[cfg(feature = "std")]
mod batch;
#[cfg(feature = "arith-integer")]
mod integer;

use crate::blob::Activations;
use crate::components::block::{self, BlockWeights};
use crate::components::norm::{self, NormWeights};
use crate::components::{embed, unembed, Rows, Step};
use crate::error::Error;
use crate::hooks::Hooks;
use crate::kv_cache::KvCache;
use crate::model::Model;
use crate::workspace::{row_ref, IntegerBuffers, Workspace};

/// A model with its KV cache and workspace: feed it tokens with [`Session::step`].
#[derive(Debug)]
pub struct Session<'a, 'b> {
    model: Model<'a>,
    ws: Workspace<'b>,
    /// The integer-only arithmetic's buffers ([`IntegerBuffers`], carved at each step; empty for
    /// other models; only in a build with the arithmetic).
    #[cfg(feature = "arith-integer")]
    int: &'b mut [f32],
    kv: KvCache<'b>,
    pos: usize,
    n_ctx: usize,
}

impl<'a, 'b> Session<'a, 'b> {
    /// A session over caller-provided buffers of at least [`Model::kv_cache_len`] and
    /// [`Model::workspace_len`] `f32` words (a `static` on a microcontroller).
    pub fn new(
        model: &Model<'a>,
        kv: &'b mut [f32],
        workspace: &'b mut [f32],
    ) -> Result<Self, Error> {
        Self::with_context(model, model.config().n_ctx, kv, workspace)
    }

    /// A session that holds at most `n_ctx` positions (`1..=` the model's `n_ctx`), over buffers of at
    /// least [`Model::kv_cache_len_at`] and [`Model::workspace_len_at`] words: a run-time limit for a
    /// device whose RAM holds less than the full context. The step after the last fails with
    /// [`Error::ContextFull`]; every step before computes the same bits as a full-context session.
    pub fn with_context(
        model: &Model<'a>,
        n_ctx: usize,
        kv: &'b mut [f32],
        workspace: &'b mut [f32],
    ) -> Result<Self, Error> {
        Self::build(model, n_ctx, 1, kv, workspace)
    }

    /// A session of at most `n_ctx` positions, `rows` of them at once (1 without `std`).
    fn build(
        model: &Model<'a>,
        n_ctx: usize,
        rows: usize,
        kv: &'b mut [f32],
        workspace: &'b mut [f32],
    ) -> Result<Self, Error> {
        if n_ctx == 0 || n_ctx > model.config().n_ctx {
            return Err(Error::OutOfRange {
                what: "context cap",
            });
        }
        let cfg = model.config().with_context(n_ctx);
        let needed = model.workspace_len_rows(n_ctx, rows);
        if workspace.len() < needed {
            return Err(Error::BufferTooSmall {
                what: "workspace",
                needed,
                found: workspace.len(),
            });
        }
        let (workspace, int) = workspace.split_at_mut(Workspace::len_rows(&cfg, rows));
        if model.integer_plan().is_some() {
            IntegerBuffers::new(&cfg, int)?;
        }
        #[cfg(not(feature = "arith-integer"))]
        let _ = int;
        Ok(Session {
            model: *model,
            ws: Workspace::with_rows(&cfg, rows, workspace)?,
            #[cfg(feature = "arith-integer")]
            int,
            kv: KvCache::new(&cfg, model.activations(), kv)?,
            pos: 0,
            n_ctx,
        })
    }

    /// The model.
    pub fn model(&self) -> &Model<'a> {
        &self.model
    }

    /// Positions this session holds: the model's `n_ctx`, or the cap of [`Session::with_context`].
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Number of tokens consumed so far (the position of the next one).
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Forgets all tokens: the next step is position 0.
    pub fn reset(&mut self) {
        self.pos = 0;
    }

    /// The workspace and the KV cache, for [`crate::Window`]'s restore.
    pub(crate) fn parts(&mut self) -> (&mut Workspace<'b>, &mut KvCache<'b>) {
        (&mut self.ws, &mut self.kv)
    }

    /// Makes `pos` the next position ([`crate::Window`], whose restored cache holds `0..pos`).
    pub(crate) fn set_pos(&mut self, pos: usize) {
        self.pos = pos.min(self.n_ctx);
    }

    /// Consumes `token` at the next position and returns its logits (`d_vocab_out`).
    pub fn step(&mut self, token: u32) -> Result<&[f32], Error> {
        self.step_with(token, &mut ())
    }

    /// [`Session::step`] with hooks called at every hook point of this position.
    pub fn step_with<H: Hooks>(&mut self, token: u32, hooks: &mut H) -> Result<&[f32], Error> {
        self.check(token, self.pos)?;
        self.forward(&[token], Rows::ONE, hooks)?;
        let dv = self.model.config().d_vocab_out;
        Ok(row_ref(self.ws.logits, 0, dv))
    }

    /// An error if `token` cannot be consumed at `pos`: the context is full, or it is out of range.
    #[inline(always)]
    fn check(&self, token: u32, pos: usize) -> Result<(), Error> {
        let d_vocab = self.model.config().d_vocab;
        if pos >= self.n_ctx {
            return Err(Error::ContextFull { n_ctx: self.n_ctx });
        }
        if token as usize >= d_vocab {
            return Err(Error::TokenOutOfRange { token, d_vocab });
        }
        Ok(())
    }

    /// The forward pass of `tokens` (checked) at the next positions, one per row of `rows` (one
    /// position on a device, [`Rows::ONE`]; a run on the host, [`batch`]): the embedding, each block,
    /// the final norm and the unembedding, each over every row before the next (TransformerLens's
    /// order), each row with the operations of a step of its own. The logits are the workspace's
    /// first rows.
    #[inline(always)]
    fn forward<H: Hooks>(
        &mut self,
        tokens: &[u32],
        rows: Rows,
        hooks: &mut H,
    ) -> Result<(), Error> {
        let model = &self.model;
        let (ws, kv) = (&mut self.ws, &mut self.kv);
        let s = &mut Step::new(model, self.pos, hooks);
        #[cfg(feature = "arith-integer")]
        if let Some(plan) = model.integer_plan() {
            let cfg = s.cfg.with_context(self.n_ctx);
            let ib = &mut IntegerBuffers::new(&cfg, self.int)?;
            for (r, &token) in tokens.iter().enumerate().take(rows.len()) {
                s.pos = self.pos + r;
                integer::forward(s, &plan, token as usize, ws, ib, kv, r)?;
            }
            self.pos += rows.len();
            return Ok(());
        }
        // A build of the integer arithmetic alone keeps no float pass.
        const FLOAT: bool = Activations::F32.compiled()
            || Activations::I8.compiled()
            || Activations::I16.compiled();
        if !FLOAT {
            return Err(Error::Unsupported {
                feature: Activations::F32.feature(),
            });
        }
        embed::forward(s, tokens, ws, rows);
        for layer in 0..s.cfg.n_layers {
            s.layer = layer;
            block::forward(s, &BlockWeights::load(model, layer)?, ws, kv, rows);
        }
        norm::forward(s, &NormWeights::final_norm(model), ws, rows);
        unembed::forward(s, ws, rows);
        self.pos += rows.len();
        Ok(())
    }
}
