//! Which tokens a command looks at: one sequence given as ids (`--tokens`), or random induction
//! sequences (`--sequences N`, as `fidelity` draws them), the first of which is shown. One place for
//! every way of giving tokens, so a command takes them all by flattening [`TokenInput`].

use anyhow::{ensure, Result};
use microlens::Model;

use microlens_host::eval::generate::{bytes_text, BYTE_VOCAB};
use microlens_host::eval::run::{check_sequences, check_tokens, DEFAULT_MAX_SEQ_LEN};
use microlens_host::eval::sequences::induction_sequences;
use microlens_host::io::tokens::parse_tokens;

/// Arguments: exactly one of `--tokens` and `--sequences`.
#[derive(clap::Args, Debug)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("token_source").required(true).args(["tokens", "sequences"])))]
pub struct TokenInput {
    /// One sequence as comma-separated token ids, e.g. 3,1,4.
    #[arg(long, allow_hyphen_values = true)]
    pub tokens: Option<String>,
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
}

impl TokenInput {
    /// The sequences for `model`.
    pub fn resolve(&self, model: &Model<'_>) -> Result<Tokens> {
        let cfg = model.config();
        let sequences = match (&self.tokens, self.sequences) {
            (Some(t), _) => vec![parse_tokens(t)?],
            (None, Some(n)) => {
                let len = self.seq_len.unwrap_or(cfg.n_ctx.min(DEFAULT_MAX_SEQ_LEN));
                ensure!(
                    (1..=cfg.n_ctx).contains(&len),
                    "--seq-len must be in 1..={} (n_ctx)",
                    cfg.n_ctx
                );
                check_sequences("--sequences", n, len)?;
                induction_sequences(n, len, cfg.d_vocab, self.seed)
            }
            (None, None) => anyhow::bail!("give --tokens or --sequences"),
        };
        for s in &sequences {
            check_tokens(model, s)?;
        }
        Ok(Tokens { sequences })
    }
}

impl Tokens {
    /// The shown sequence.
    pub fn shown(&self) -> &[u32] {
        &self.sequences[0]
    }

    /// Each shown token's text: its byte for a byte-level model (`d_vocab` 256), else its id.
    pub fn labels(&self, model: &Model<'_>) -> Vec<String> {
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
