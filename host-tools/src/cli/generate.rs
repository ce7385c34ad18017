//! `microlens generate MODEL.mlb (--tokens 1,2,3 | --text "...") --max-new-tokens N`: the greedy
//! continuation of a prompt through the core's `Session` and its KV cache.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use microlens::Model;
use microlens_host::eval::generate::{bytes_text, greedy, BYTE_VOCAB};
use microlens_host::io::tokens::parse_tokens;

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

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let bytes = microlens_host::io::files::read_blob(&args.model)?;
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
