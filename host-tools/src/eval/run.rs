//! Running tokens through a blob with the core crate's own [`Session`] (the host never has a second forward
//! pass), recording logits and attention patterns.

use anyhow::{bail, Context, Result};
use microlens::analysis::PatternRecorder;
use microlens::{Hooks, Model, Session};

/// Logits and patterns of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutput {
    /// `[pos][d_vocab_out]`.
    pub logits: Vec<Vec<f32>>,
    /// `[layer][head][query][key]`, zero above the diagonal.
    pub patterns: Vec<Vec<Vec<Vec<f32>>>>,
}

/// Checks a token list against the model: not empty, at most `n_ctx` long, every token below `d_vocab`.
pub fn check_tokens(model: &Model<'_>, tokens: &[u32]) -> Result<()> {
    let cfg = model.config();
    if tokens.is_empty() {
        bail!("no tokens given");
    }
    if tokens.len() > cfg.n_ctx {
        bail!(
            "{} tokens given, but the model's context is n_ctx = {}",
            tokens.len(),
            cfg.n_ctx
        );
    }
    if let Some((pos, t)) = tokens
        .iter()
        .enumerate()
        .find(|(_, &t)| t as usize >= cfg.d_vocab)
    {
        bail!(
            "token {t} at position {pos} is out of range (d_vocab = {})",
            cfg.d_vocab
        );
    }
    Ok(())
}

/// Runs `tokens` from position 0 through `model` with `hooks`, returning every position's logits.
pub fn run_with_hooks<H: Hooks>(
    model: &Model<'_>,
    tokens: &[u32],
    hooks: &mut H,
) -> Result<Vec<Vec<f32>>> {
    check_tokens(model, tokens)?;
    let mut kv = vec![0.0; model.kv_cache_len()];
    let mut ws = vec![0.0; model.workspace_len()];
    let mut session = Session::new(model, &mut kv, &mut ws)?;
    let mut logits = Vec::with_capacity(tokens.len());
    session.run(tokens, hooks, |_, l| logits.push(l.to_vec()))?;
    Ok(logits)
}

/// Runs `tokens` through `model`, recording logits and attention patterns (with the core's
/// [`PatternRecorder`]).
pub fn run_model(model: &Model<'_>, tokens: &[u32]) -> Result<RunOutput> {
    run_model_with(model, tokens, &mut ())
}

/// [`run_model`] with `hooks` called before the recorder at every point (so it records what they
/// write).
pub fn run_model_with<H: Hooks>(
    model: &Model<'_>,
    tokens: &[u32],
    hooks: &mut H,
) -> Result<RunOutput> {
    let cfg = model.config();
    let (l, h, n) = (cfg.n_layers, cfg.n_heads, tokens.len());
    let mut buf = vec![0.0; PatternRecorder::len(l, h, n)];
    let mut recorder =
        PatternRecorder::new(&mut buf, 0, l, h, n).context("pattern buffer too small")?;
    let logits = run_with_hooks(model, tokens, &mut (hooks, &mut recorder))?;
    let head = |layer, head| match recorder.pattern(layer, head) {
        Some(p) => p.chunks_exact(n).map(<[f32]>::to_vec).collect(),
        None => vec![vec![0.0; n]; n],
    };
    let patterns = (0..l)
        .map(|layer| (0..h).map(|hd| head(layer, hd)).collect())
        .collect();
    Ok(RunOutput { logits, patterns })
}

/// Reads a blob and runs `tokens` through it ([`run_model`]).
pub fn run_blob(blob: &[u8], tokens: &[u32]) -> Result<RunOutput> {
    run_model(&Model::from_bytes(blob)?, tokens)
}

/// `log_softmax` of one logit row, computed in `f64` ([`crate::eval::metrics::log_softmax`]), as `f32`.
pub fn log_softmax(logits: &[f32]) -> Vec<f32> {
    crate::eval::metrics::log_softmax(logits)
        .into_iter()
        .map(|x| x as f32)
        .collect()
}
