//! A text prompt's greedy continuation: token ids, and for a byte-level model text lines.

use microlens::Session;

use crate::board::Counter;
use crate::error::FirmwareError;
use crate::eval::argmax;
use crate::line;
use crate::model::{Token, N_CTX};
use crate::prompt::Prompt;

/// Most tokens the continuation has.
pub const MAX_NEW: usize = 16;

/// Feeds the prompt, then each argmax in turn, and prints `continuation=` (token ids, which `cargo
/// xtask firmware` checks against the host's `microlens generate` and decodes) and, for a byte-level
/// model, `prompt_text=` and `continuation_text=`. The continuation has [`MAX_NEW`] tokens, fewer if the context is shorter:
/// prompt and continuation but its last token fit in the session's context.
#[inline(never)]
pub fn continue_prompt(
    session: &mut Session<'_, '_>,
    prompt: &Prompt,
    counter: &mut Counter,
) -> Result<(), FirmwareError> {
    let tokens = prompt.tokens();
    let n_new = MAX_NEW.min((N_CTX + 1).saturating_sub(tokens.len()));
    let mut out: [Token; MAX_NEW] = [0; MAX_NEW];
    let mut next = 0u32;
    crate::run_prompt(session, prompt, &mut (), counter, &mut |_, logits| {
        next = argmax(logits);
    })?;
    for i in 0..n_new {
        out[i] = next as Token;
        if i + 1 < n_new {
            next = argmax(session.step(next)?);
        }
    }
    line::print_tokens("continuation=", &out[..n_new]);
    if crate::model::BYTES {
        line::print_text("prompt_text=", tokens);
        line::print_text("continuation_text=", &out[..n_new]);
    }
    Ok(())
}
