//! Token input shared by every command: `--tokens` or `--text`, the tokenizer (`--tokenizer FILE`) and
//! TransformerLens's BOS rule (`--prepend-bos` / `--no-prepend-bos`).

use std::path::{Path, PathBuf};

use anyhow::Result;
use microlens::Model;
use microlens_host::io::tokens::parse_tokens;
use microlens_host::text::{for_model, Encoded, TextSide};

/// The tokenizer options of a command that reads text.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TokenizerArgs {
    /// Tokenizer of the text (a HuggingFace tokenizer.json) [default: tokenizer.json beside the blob;
    /// the byte tokenizer for byte-level models]. One other than the blob was converted with is refused.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// Put the BOS token before each text, as TransformerLens's `prepend_bos` [default: the model's
    /// `default_prepend_bos` when its tokenizer has a BOS token].
    #[arg(long, overrides_with = "no_prepend_bos")]
    pub prepend_bos: bool,
    /// No BOS token before the text.
    #[arg(long, overrides_with = "prepend_bos")]
    pub no_prepend_bos: bool,
}

/// A model's tokenizer with the BOS choice of the command line.
pub struct Text {
    /// The model's tokenizer side.
    pub side: TextSide,
    /// Whether text gets a BOS token first.
    pub prepend_bos: bool,
}

impl Text {
    /// `text` as tokens (with the BOS rule) and their offsets.
    pub fn encode(&self, text: &str) -> Result<Encoded> {
        self.side.tokenizer()?.encode(text, self.prepend_bos)
    }

    /// The one token of `text`, no BOS (`what` names the option in errors).
    pub fn one_token(&self, text: &str, what: &str) -> Result<u32> {
        self.side.tokenizer()?.one_token(text, what)
    }

    /// `ids` as string tokens, if the model has a tokenizer.
    pub fn str_tokens(&self, ids: &[u32]) -> Result<Option<Vec<String>>> {
        self.side.str_tokens(ids)
    }
}

impl TokenizerArgs {
    /// The tokenizer of the model read from `blob`, and the BOS choice.
    pub fn open(&self, model: &Model<'_>, blob: &Path) -> Result<Text> {
        let side = for_model(model, self.tokenizer.as_deref(), blob)?;
        let asked = match (self.prepend_bos, self.no_prepend_bos) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        };
        Ok(Text {
            prepend_bos: side.prepend_bos(asked),
            side,
        })
    }
}

/// One sequence of tokens: `--tokens 3,1,4` or `--text "..."`.
#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("token_input").required(true).args(["tokens", "text"])))]
pub struct TokenArgs {
    /// Comma-separated token ids, e.g. 3,1,4.
    #[arg(long, allow_hyphen_values = true)]
    pub tokens: Option<String>,
    /// Text, tokenized by the model's tokenizer (TransformerLens's to_tokens).
    #[arg(long)]
    pub text: Option<String>,
    /// The tokenizer options.
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
}

/// Tokens from the command line, with their string tokens when the model has a tokenizer.
pub struct Tokens {
    /// Token ids.
    pub ids: Vec<u32>,
    /// TransformerLens's `to_str_tokens` of `ids`.
    pub str_tokens: Option<Vec<String>>,
    /// The tokenizer they were read with.
    pub text: Text,
}

impl TokenArgs {
    /// The tokens of the model read from `blob`.
    pub fn resolve(&self, model: &Model<'_>, blob: &Path) -> Result<Tokens> {
        let text = self.tokenizer.open(model, blob)?;
        let ids = match (&self.tokens, &self.text) {
            (Some(t), _) => parse_tokens(t)?,
            (None, Some(s)) => text.encode(s)?.ids,
            (None, None) => anyhow::bail!("give --tokens or --text"),
        };
        Ok(Tokens {
            str_tokens: text.str_tokens(&ids)?,
            ids,
            text,
        })
    }
}

/// Prints `label: 0 "The" 1 " E" ...`: each position's string token.
pub fn print_str_tokens(label: &str, str_tokens: &[String]) {
    let cells: Vec<String> = str_tokens
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{i}:{s:?}"))
        .collect();
    println!("{label}: {}", cells.join(" "));
}
