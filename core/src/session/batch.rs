//! The host's batch path (feature `std`): a session built [`Session::with_rows`] runs a run of
//! positions through [`Session::run`] together, layer by layer, on the same components as a step
//! (their batched matmuls where the arithmetic allows), each position with a step's operations, so
//! the same bits.

use super::Session;
use crate::components::Rows;
use crate::error::Error;
use crate::hooks::Hooks;
use crate::model::Model;
use crate::workspace::row_ref;

impl<'a, 'b> Session<'a, 'b> {
    /// A session of at most `n_ctx` positions that computes up to `rows` positions together in
    /// [`Session::run`] (host, feature `std`): over buffers of at least [`Model::kv_cache_len_at`] and
    /// [`Model::workspace_len_rows`] words. The same logits as [`Session::with_context`], bit for bit.
    pub fn with_rows(
        model: &Model<'a>,
        n_ctx: usize,
        rows: usize,
        kv: &'b mut [f32],
        workspace: &'b mut [f32],
    ) -> Result<Self, Error> {
        Self::build(model, n_ctx, rows, kv, workspace)
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
            self.forward(&rest[..n], Rows::new(n), hooks)?;
            for r in 0..n {
                on_logits(pos + r, row_ref(self.ws.logits, r, dv));
            }
            rest = &rest[n..];
        }
        Ok(())
    }
}
