//! Greedy decoding through the core's [`Session`] and its KV cache (each token is fed once), as
//! `microlens generate` runs it.

use anyhow::{ensure, Result};
use microlens::{Model, Session};

use super::metrics::argmax;
use super::run::check_tokens;

pub use crate::text::bytes::{bytes_text, BYTE_VOCAB};

/// The `n` tokens a greedy decoder appends to `prompt`: feed the prompt, then each argmax in turn.
pub fn greedy(model: &Model<'_>, prompt: &[u32], n: usize) -> Result<Vec<u32>> {
    check_tokens(model, prompt)?;
    let n_ctx = model.config().n_ctx;
    let room = (n_ctx + 1).saturating_sub(prompt.len());
    ensure!(
        n <= room,
        "--max-new-tokens {n}: a prompt of {} tokens leaves room for at most {room} new tokens \
         (n_ctx = {n_ctx})",
        prompt.len()
    );
    let mut kv = vec![0.0; model.kv_cache_len()];
    let mut ws = vec![0.0; model.workspace_len()];
    let mut session = Session::new(model, &mut kv, &mut ws)?;
    let mut next = 0u32;
    for &t in prompt {
        next = argmax(session.step(t)?) as u32;
    }
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        out.push(next);
        if out.len() < n {
            next = argmax(session.step(next)?) as u32;
        }
    }
    Ok(out)
}
