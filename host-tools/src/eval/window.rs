//! Running a token stream longer than the context through the core's sliding [`Window`]: at every
//! position, the logits of a fresh run over the last `width` tokens.

use anyhow::{bail, Result};
use microlens::{Model, Session, Window, WindowMode};

use super::run::{buffer, check_finite, check_vocab, session_buffers, MAX_TOKENS};

/// Checks a window's width and a stream against the model: width in `1..=n_ctx`, a non-empty stream of
/// at most [`MAX_TOKENS`] tokens, each below `d_vocab`.
pub fn check_window(model: &Model<'_>, tokens: &[u32], width: usize) -> Result<()> {
    let cfg = model.config();
    if width == 0 || width > cfg.n_ctx {
        bail!(
            "--window {width}: the window must hold 1 to n_ctx = {} tokens",
            cfg.n_ctx
        );
    }
    if tokens.is_empty() {
        bail!("no tokens given");
    }
    if tokens.len() > MAX_TOKENS {
        bail!(
            "{} tokens given: at most {MAX_TOKENS} at once",
            tokens.len()
        );
    }
    check_vocab(model, tokens)
}

/// Every position's logits of `tokens` through a window of `width` tokens, and how it slid.
pub fn run_window(
    model: &Model<'_>,
    tokens: &[u32],
    width: usize,
) -> Result<(Vec<Vec<f32>>, WindowMode)> {
    check_window(model, tokens, width)?;
    let (mut kv, mut ws) = session_buffers(model, width)?;
    let mut session = Session::with_context(model, width, &mut kv, &mut ws)?;
    let mut window_tokens = vec![0u32; width];
    let mut kept = buffer(Window::kept_len(model.config(), width), "window keys")?;
    let mut window = Window::new(&mut session, width, &mut window_tokens, &mut kept)?;
    let logits = tokens
        .iter()
        .map(|&t| Ok(window.step(t)?.to_vec()))
        .collect::<Result<Vec<_>>>()?;
    check_finite(&logits)?;
    Ok((logits, window.mode()))
}
