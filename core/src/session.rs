//! A decoding session: the forward pass, one token at a time, over a KV cache. Read top to bottom.

use crate::components::block::{BlockWeights, NormWeights};
use crate::components::norm::Which;
use crate::components::{attention, embed, mlp, norm, unembed, Step};
use crate::config::{Config, Positional};
use crate::error::Error;
use crate::features::{MLP, ROTARY};
use crate::hooks::{HookKind, Hooks};
use crate::kv_cache::KvCache;
use crate::math::{add, rotary};
use crate::model::Model;
use crate::workspace::{row, row_ref, run_len, Workspace};

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
        Self::build(model, n_ctx, 1, kv, workspace)
    }

    /// A session of at most `n_ctx` positions that computes up to `rows` positions together in
    /// [`Session::run`] (host, feature `std`): over buffers of at least [`Model::kv_cache_len_at`] and
    /// [`Model::workspace_len_rows`] words. The same logits as [`Session::with_context`], bit for bit.
    #[cfg(feature = "std")]
    pub fn with_rows(
        model: &Model<'a>,
        n_ctx: usize,
        rows: usize,
        kv: &'b mut [f32],
        workspace: &'b mut [f32],
    ) -> Result<Self, Error> {
        Self::build(model, n_ctx, rows, kv, workspace)
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
        Ok(Session {
            model: *model,
            ws: Workspace::with_rows(&cfg, rows, workspace)?,
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
        self.forward(&[token], hooks)?;
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

    /// The forward pass of `tokens` (checked, at most the workspace's rows) at the next positions,
    /// layer by layer over all of them: each component computes every position of the run before
    /// the next component (TransformerLens's order), each position with the operations of a step of
    /// its own. Their logits are the workspace's first `tokens.len()` rows.
    #[inline(always)]
    fn forward<H: Hooks>(&mut self, tokens: &[u32], hooks: &mut H) -> Result<(), Error> {
        let cfg = *self.model.config();
        let (pos, n) = (self.pos, run_len(tokens.len().min(self.ws.rows())));
        let ws = &mut self.ws;
        let model = &self.model;
        let s = &mut Step::new(model, pos, hooks);
        let dm = cfg.d_model;

        for r in 0..n {
            s.pos = pos + r;
            let token = tokens.get(r).copied().unwrap_or(0);
            embed::forward(s, token as usize, ws, r);
            rotary_angles(&cfg, s.pos, ws, r);
        }

        for layer in 0..cfg.n_layers {
            s.layer = layer;
            let w = BlockWeights::load(model, layer)?;
            for r in 0..n {
                s.pos = pos + r;
                s.hook(HookKind::ResidPre, 0, row(ws.resid, r, dm));
                norm::forward(s, Which::Ln1, &w.ln1, ws, r);
            }
            s.pos = pos;
            attention::forward(s, &w.attn, ws, &mut self.kv, n);
            for r in 0..n {
                s.pos = pos + r;
                add(row(ws.resid, r, dm), row(ws.attn_out, r, dm));
            }

            if let (Some((ln2, mlp_w)), true) = (&w.mlp, MLP) {
                for r in 0..n {
                    s.pos = pos + r;
                    s.hook(HookKind::ResidMid, 0, row(ws.resid, r, dm));
                    norm::forward(s, Which::Ln2, ln2, ws, r);
                }
                s.pos = pos;
                mlp::forward(s, mlp_w, ws, n);
                for r in 0..n {
                    add(row(ws.resid, r, dm), row(ws.mlp_out, r, dm));
                }
            }
            for r in 0..n {
                s.pos = pos + r;
                s.hook(HookKind::ResidPost, 0, row(ws.resid, r, dm));
            }
        }

        let final_norm = NormWeights::final_norm(model);
        for r in 0..n {
            s.pos = pos + r;
            norm::forward(s, Which::Final, &final_norm, ws, r);
        }
        s.pos = pos;
        unembed::forward(s, ws, n);

        self.pos += n;
        Ok(())
    }

    /// Steps through `tokens` from the current position, handing each position's logits to `on_logits`.
    /// The same logits, hooks and errors as calling [`Session::step_with`] in a loop: a session built
    /// `Session::with_rows` computes up to that many positions together, layer by layer (the hooks
    /// called layer-major, each with its own position), each position with the same operations, so
    /// the same bits.
    pub fn run<H: Hooks>(
        &mut self,
        tokens: &[u32],
        hooks: &mut H,
        mut on_logits: impl FnMut(usize, &[f32]),
    ) -> Result<(), Error> {
        let dv = self.model.config().d_vocab_out;
        let mut rest = tokens;
        while let Some(&first) = rest.first() {
            let pos = self.pos;
            self.check(first, pos)?;
            // The longest run of checked tokens from here (a step-by-step loop stops at the first
            // one it refuses, after the ones before it).
            let limit = self.ws.rows().min(self.n_ctx - pos).min(rest.len());
            let n = rest[..limit]
                .iter()
                .position(|&t| t as usize >= self.model.config().d_vocab)
                .unwrap_or(limit);
            self.forward(&rest[..n], hooks)?;
            for r in 0..n {
                on_logits(pos + r, row_ref(self.ws.logits, r, dv));
            }
            rest = &rest[n..];
        }
        Ok(())
    }
}

/// The rotary sines and cosines of position `pos` into row `r` of the workspace's (rotary models only).
fn rotary_angles(cfg: &Config, pos: usize, ws: &mut Workspace<'_>, r: usize) {
    if let (
        Positional::Rotary {
            dim,
            base,
            adjacent_pairs,
        },
        true,
    ) = (cfg.positional, ROTARY)
    {
        let (sin, cos) = (row(ws.rot_sin, r, dim), row(ws.rot_cos, r, dim));
        rotary::angles(pos, dim, base, adjacent_pairs, sin, cos);
    }
}
