//! `microlens generate MODEL.mlb (--tokens 1,2,3 | --text "...") --max-new-tokens N`: the greedy
//! continuation of a prompt through the core's [`Session`] and its KV cache (each token is fed once).

use std::path::PathBuf;

use anyhow::{bail, ensure, Context, Result};
use microlens::{Model, Session};

use super::run::parse_tokens;
use crate::fidelity::argmax;
use crate::run::check_tokens;

/// Vocabulary size of a byte-level model: token `b` is the byte `b`.
pub const BYTE_VOCAB: usize = 256;

/// Arguments.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("prompt").required(true).args(["tokens", "text"])))]
pub struct Args {
    /// The blob (.mlb).
    pub model: PathBuf,
    /// Prompt as comma-separated token ids, e.g. 3,1,4.
    #[arg(long)]
    pub tokens: Option<String>,
    /// Prompt as text, one token per byte (byte-level models, d_vocab 256).
    #[arg(long)]
    pub text: Option<String>,
    /// Tokens to generate (prompt + new tokens - 1 must fit in n_ctx).
    #[arg(long, default_value_t = 16)]
    pub max_new_tokens: usize,
    /// Print `{"tokens": [...], "text": "..."}` (`text` null unless the model is byte-level).
    #[arg(long)]
    pub json: bool,
}

/// The `n` tokens a greedy decoder appends to `prompt`: feed the prompt, then each argmax in turn.
pub fn greedy(model: &Model<'_>, prompt: &[u32], n: usize) -> Result<Vec<u32>> {
    check_tokens(model, prompt)?;
    let n_ctx = model.config().n_ctx;
    ensure!(
        prompt.len() + n <= n_ctx + 1,
        "a prompt of {} tokens leaves room for at most {} new tokens (n_ctx = {n_ctx}), not {n}",
        prompt.len(),
        (n_ctx + 1).saturating_sub(prompt.len())
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

/// Bytes as text (invalid UTF-8 replaced by U+FFFD).
pub fn bytes_text(tokens: &[u32]) -> String {
    let bytes: Vec<u8> = tokens.iter().map(|&t| t as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let bytes = std::fs::read(&args.model)
        .with_context(|| format!("cannot read {}", args.model.display()))?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    let byte_model = model.config().d_vocab == BYTE_VOCAB;
    let prompt = match (&args.tokens, &args.text) {
        (Some(t), None) => parse_tokens(t)?,
        (None, Some(text)) => {
            if !byte_model {
                bail!(
                    "--text needs a byte-level model (d_vocab {BYTE_VOCAB}); this one has d_vocab {}: use --tokens",
                    model.config().d_vocab
                );
            }
            text.bytes().map(u32::from).collect()
        }
        _ => bail!("give exactly one of --tokens and --text"),
    };
    let new = greedy(&model, &prompt, args.max_new_tokens)?;
    let text = byte_model.then(|| bytes_text(&new));
    if args.json {
        println!("{}", serde_json::json!({"tokens": new, "text": text}));
    } else if args.text.is_some() {
        println!("{}", text.unwrap_or_default());
    } else {
        let list: Vec<String> = new.iter().map(u32::to_string).collect();
        println!("{}", list.join(","));
    }
    Ok(())
}
