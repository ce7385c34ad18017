//! Direct logit attribution per head over a sequence, with the core's [`DirectLogitAttribution`] hook
//! (see it for the exact formula: frozen final-norm scale, centred for LN/LNPre, `ln_final.w` included).

use anyhow::{bail, Context, Result};
use microlens::analysis::DirectLogitAttribution;
use microlens::{Model, Session};

use crate::eval::run::check_tokens;

/// What a position's attribution is to.
#[derive(Clone, Copy)]
enum Target {
    Logit(usize),
    LogitDiff(usize, usize),
}

/// Steps through `tokens`; at each position with a target, each head's attribution to it
/// (`[layer * n_heads + head]`), in position order.
fn attribute(
    model: &Model<'_>,
    tokens: &[u32],
    target: impl Fn(usize) -> Option<Target>,
) -> Result<Vec<Vec<f32>>> {
    check_tokens(model, tokens)?;
    let cfg = model.config();
    let (mut kv, mut ws) = crate::eval::run::session_buffers(model, tokens.len())?;
    let mut session = Session::with_context(model, tokens.len(), &mut kv, &mut ws)?;
    let (mut dir, mut out) = (
        vec![0.0; cfg.d_model],
        vec![0.0; cfg.n_layers * cfg.n_heads],
    );
    let mut rows = Vec::new();
    for (pos, &token) in tokens.iter().enumerate() {
        let Some(t) = target(pos) else {
            session.step(token)?;
            continue;
        };
        let mut dla = match t {
            Target::Logit(t) => DirectLogitAttribution::token(model, t, &mut dir, &mut out),
            Target::LogitDiff(a, w) => {
                DirectLogitAttribution::logit_diff(model, a, w, &mut dir, &mut out)
            }
        }
        .context("token outside the unembedding")?;
        session.step_with(token, &mut dla)?;
        rows.push(dla.values().to_vec());
    }
    Ok(rows)
}

/// For every position but the last, each head's direct contribution to the logit of the **next** token,
/// `[pos][layer * n_heads + head]`.
pub fn direct_logit_attribution(model: &Model<'_>, tokens: &[u32]) -> Result<Vec<Vec<f32>>> {
    attribute(model, tokens, |pos| {
        tokens.get(pos + 1).map(|&t| Target::Logit(t as usize))
    })
}

/// Each head's direct contribution to `logit[token]` at the last position, `[layer * n_heads + head]`.
pub fn last_position_attribution(
    model: &Model<'_>,
    tokens: &[u32],
    token: u32,
) -> Result<Vec<f32>> {
    let d_vocab_out = model.config().d_vocab_out;
    if token as usize >= d_vocab_out {
        bail!("token {token} is not below d_vocab_out = {d_vocab_out}");
    }
    let last = tokens.len().saturating_sub(1);
    let target = Target::Logit(token as usize);
    let rows = attribute(model, tokens, |pos| (pos == last).then_some(target))?;
    rows.into_iter().next().context("no tokens")
}

/// Each head's direct contribution to `logit[answer] - logit[wrong]` at the last position,
/// `[layer * n_heads + head]`.
pub fn logit_diff_attribution(
    model: &Model<'_>,
    tokens: &[u32],
    answer: u32,
    wrong: u32,
) -> Result<Vec<f32>> {
    let d_vocab_out = model.config().d_vocab_out;
    if answer as usize >= d_vocab_out || wrong as usize >= d_vocab_out {
        bail!("answer and wrong tokens must be below d_vocab_out = {d_vocab_out}");
    }
    let last = tokens.len().saturating_sub(1);
    let target = Target::LogitDiff(answer as usize, wrong as usize);
    let rows = attribute(model, tokens, |pos| (pos == last).then_some(target))?;
    rows.into_iter().next().context("no tokens")
}
