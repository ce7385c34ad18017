//! `microlens generate MODEL.mlb (--tokens 1,2,3 | --text "...") --max-new-tokens N`: the greedy
//! continuation of a prompt through the core's `Session` and its KV cache.

use std::path::PathBuf;

use anyhow::{Context, Result};
use microlens::Model;
use microlens_host::eval::generate::greedy;

use super::text_input::TokenArgs;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb).
    pub model: PathBuf,
    /// The prompt: `--tokens 3,1,4` or `--text "..."` (byte-level models read text byte by byte).
    #[command(flatten)]
    pub input: TokenArgs,
    /// Tokens to generate (prompt + new tokens - 1 must fit in n_ctx).
    #[arg(long, default_value_t = 16)]
    pub max_new_tokens: usize,
    /// Print `{"tokens": [...], "text": "..."}` (`text` null when the model has no tokenizer).
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let bytes = microlens_host::io::files::read_blob(&args.model)?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    let input = args.input.resolve(&model, &args.model)?;
    let new = greedy(&model, &input.ids, args.max_new_tokens)?;
    let text = input
        .text
        .side
        .tokenizer
        .as_ref()
        .map(|t| t.decode(&new))
        .transpose()?;
    if args.json {
        println!("{}", serde_json::json!({"tokens": new, "text": text}));
    } else if args.input.text.is_some() {
        println!("{}", text.unwrap_or_default());
    } else {
        let list: Vec<String> = new.iter().map(u32::to_string).collect();
        println!("{}", list.join(","));
    }
    Ok(())
}
