//! A decoding session: the forward pass, one token at a time, over a KV cache. Read top to bottom.

use crate::components::block::{BlockWeights, NormWeights};
use crate::components::norm::Which;
use crate::components::{attention, embed, mlp, norm, unembed, Step};
use crate::config::{Config, Positional};
use crate::error::Error;
use crate::features::{MLP, ROTARY};
use crate::hooks::{HookKind, Hooks};
use crate::kv_cache::KvCache;
use crate::math::rotary;
use crate::model::Model;
use crate::workspace::Workspace;

/// A model with its KV cache and workspace: feed it tokens with [`Session::step`].
#[derive(Debug)]
pub struct Session<'a, 'b> {
    model: Model<'a>,
    ws: Workspace<'b>,
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
        if n_ctx == 0 || n_ctx > model.config().n_ctx {
            return Err(Error::OutOfRange {
                what: "context cap",
            });
        }
        let cfg = model.config().with_context(n_ctx);
        Ok(Session {
            model: *model,
            ws: Workspace::new(&cfg, workspace)?,
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
        let cfg = *self.model.config();
        let pos = self.pos;
        if pos >= self.n_ctx {
            return Err(Error::ContextFull { n_ctx: self.n_ctx });
        }
        if token as usize >= cfg.d_vocab {
            return Err(Error::TokenOutOfRange {
                token,
                d_vocab: cfg.d_vocab,
            });
        }
        let ws = &mut self.ws;
        let model = &self.model;
        let s = &mut Step::new(model, pos, hooks);

        embed::forward(s, token as usize, ws);
        rotary_angles(&cfg, pos, ws);

        for layer in 0..cfg.n_layers {
            s.layer = layer;
            let w = BlockWeights::load(model, layer)?;
            s.hook(HookKind::ResidPre, 0, ws.resid);

            norm::forward(s, Which::Ln1, &w.ln1, ws);
            attention::forward(s, &w.attn, ws, &mut self.kv);
            add(ws.resid, ws.attn_out);

            if let (Some((ln2, mlp_w)), true) = (&w.mlp, MLP) {
                s.hook(HookKind::ResidMid, 0, ws.resid);
                norm::forward(s, Which::Ln2, ln2, ws);
                mlp::forward(s, mlp_w, ws);
                add(ws.resid, ws.mlp_out);
            }
            s.hook(HookKind::ResidPost, 0, ws.resid);
        }

        norm::forward(s, Which::Final, &NormWeights::final_norm(model), ws);
        unembed::forward(s, ws);

        self.pos += 1;
        Ok(ws.logits)
    }

    /// Steps through `tokens` from the current position, handing each position's logits to `on_logits`.
    /// Identical to calling [`Session::step_with`] in a loop (it is that loop).
    pub fn run<H: Hooks>(
        &mut self,
        tokens: &[u32],
        hooks: &mut H,
        mut on_logits: impl FnMut(usize, &[f32]),
    ) -> Result<(), Error> {
        for &t in tokens {
            let pos = self.pos;
            let logits = self.step_with(t, hooks)?;
            on_logits(pos, logits);
        }
        Ok(())
    }
}

/// `acc += x`.
fn add(acc: &mut [f32], x: &[f32]) {
    acc.iter_mut().zip(x).for_each(|(a, x)| *a += x);
}

/// The rotary sines and cosines of position `pos` into the workspace (rotary models only).
fn rotary_angles(cfg: &Config, pos: usize, ws: &mut Workspace<'_>) {
    if let (
        Positional::Rotary {
            dim,
            base,
            adjacent_pairs,
        },
        true,
    ) = (cfg.positional, ROTARY)
    {
        rotary::angles(pos, dim, base, adjacent_pairs, ws.rot_sin, ws.rot_cos);
    }
}
