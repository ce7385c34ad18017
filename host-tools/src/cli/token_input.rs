//! Which tokens a command looks at: one sequence given as ids (`--tokens`) or text (`--text`, with the
//! tokenizer options of [`TokenizerArgs`]), or random induction sequences (`--sequences N`, as `fidelity` draws them), the first of which is shown. One place for
//! every way of giving tokens, so a command takes them all by flattening [`TokenInput`].

use std::path::Path;

use anyhow::{ensure, Result};
use microlens::Model;

use microlens_host::eval::generate::{bytes_text, BYTE_VOCAB};
use microlens_host::eval::run::{check_sequences, check_tokens, DEFAULT_MAX_SEQ_LEN};
use microlens_host::eval::sequences::induction_sequences;
use microlens_host::io::tokens::parse_tokens;

use super::text_input::TokenizerArgs;

/// Arguments: exactly one of `--tokens`, `--text` and `--sequences`.
#[derive(clap::Args, Debug)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("token_source").required(true).args(["tokens", "text", "sequences"])))]
pub struct TokenInput {
    /// One sequence as comma-separated token ids, e.g. 3,1,4.
    #[arg(long, allow_hyphen_values = true)]
    pub tokens: Option<String>,
    /// One sequence as text, tokenized by the model's tokenizer (TransformerLens's to_tokens).
    #[arg(long)]
    pub text: Option<String>,
    /// The tokenizer options of `--text`.
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
    /// This many random sequences (a random prefix, then a random segment repeated, as `fidelity`
    /// draws them); the first is shown, the scores average all.
    #[arg(long)]
    pub sequences: Option<usize>,
    /// Length of each random sequence [default: the model's n_ctx, at most 256].
    #[arg(long, requires = "sequences")]
    pub seq_len: Option<usize>,
    /// Seed of the random sequences.
    #[arg(long, default_value_t = 0, requires = "sequences")]
    pub seed: u64,
}

/// The sequences a command runs, each checked against the model.
pub struct Tokens {
    /// Every sequence; the first is the one shown.
    pub sequences: Vec<Vec<u32>>,
    /// The shown sequence's string tokens (TransformerLens's `to_str_tokens`), when the model has a
    /// tokenizer.
    pub str_tokens: Option<Vec<String>>,
}

impl TokenInput {
    /// The sequences for `model`, read from `blob` (its tokenizer is found beside it).
    pub fn resolve(&self, model: &Model<'_>, blob: &Path) -> Result<Tokens> {
        let cfg = model.config();
        let text = self.tokenizer.open(model, blob)?;
        let sequences = match (&self.tokens, &self.text, self.sequences) {
            (Some(t), _, _) => vec![parse_tokens(t)?],
            (None, Some(words), _) => vec![text.encode(words)?.ids],
            (None, None, Some(n)) => {
                let len = self.seq_len.unwrap_or(cfg.n_ctx.min(DEFAULT_MAX_SEQ_LEN));
                ensure!(
                    (1..=cfg.n_ctx).contains(&len),
                    "--seq-len must be in 1..={} (n_ctx)",
                    cfg.n_ctx
                );
                check_sequences("--sequences", n, len)?;
                induction_sequences(n, len, cfg.d_vocab, self.seed)
            }
            (None, None, None) => anyhow::bail!("give --tokens, --text or --sequences"),
        };
        for s in &sequences {
            check_tokens(model, s)?;
        }
        Ok(Tokens {
            str_tokens: text.str_tokens(&sequences[0])?,
            sequences,
        })
    }
}

impl Tokens {
    /// The shown sequence.
    pub fn shown(&self) -> &[u32] {
        &self.sequences[0]
    }

    /// Each shown token's text: its string token when the model has a tokenizer, its byte for a
    /// byte-level model (`d_vocab` 256), else its id.
    pub fn labels(&self, model: &Model<'_>) -> Vec<String> {
        if let Some(s) = &self.str_tokens {
            return s.clone();
        }
        let bytes = model.config().d_vocab == BYTE_VOCAB;
        self.shown()
            .iter()
            .map(|&t| match bytes {
                true => bytes_text(&[t]),
                false => t.to_string(),
            })
            .collect()
    }

    /// The shown sequence as text, for a byte-level model.
    pub fn text(&self, model: &Model<'_>) -> Option<String> {
        (model.config().d_vocab == BYTE_VOCAB).then(|| bytes_text(self.shown()))
    }
}
