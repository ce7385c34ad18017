//! One tokenizer for every command: a HuggingFace tokenizer or the byte tokenizer, with
//! TransformerLens's `to_tokens` (one BOS first when asked, never two) and `to_str_tokens`.

use std::path::Path;

use anyhow::{anyhow, bail, ensure, Result};
use microlens::blob::TokenizerRecord;

use super::bytes;
use super::hf::HfTokenizer;
use super::llama2c::{self, Llama2cTokenizer};

/// A tokenizer of text for a model.
#[derive(Debug)]
pub enum TextTokenizer {
    /// Byte-level models: token `b` is the byte `b`, no BOS token.
    Bytes,
    /// A HuggingFace `tokenizer.json`.
    Hf(Box<HfTokenizer>),
    /// llama2.c's `tokenizer.bin`.
    Llama2c(Box<Llama2cTokenizer>),
}

/// Tokens of a text, each with the byte range of the text it covers (`(0, 0)` for a BOS token added).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// Token ids.
    pub ids: Vec<u32>,
    /// Byte ranges in the text, one per token.
    pub offsets: Vec<(usize, usize)>,
}

impl TextTokenizer {
    /// A tokenizer file for a model of `d_vocab` tokens: llama2.c's `tokenizer.bin` (a `.bin` file,
    /// read for exactly `d_vocab` tokens) or a HuggingFace `tokenizer.json` (ids below `d_vocab`).
    pub fn load(path: &Path, d_vocab: usize) -> Result<Self> {
        if path.extension().is_some_and(|e| e == "bin") {
            return Ok(TextTokenizer::Llama2c(Box::new(Llama2cTokenizer::load(
                path, d_vocab,
            )?)));
        }
        let t = HfTokenizer::load(path)?;
        t.check_vocab(d_vocab)?;
        Ok(TextTokenizer::Hf(Box::new(t)))
    }

    /// The record a blob converted with this tokenizer file holds (`None` for the byte tokenizer).
    pub fn record(&self, prepend_bos: bool) -> Option<TokenizerRecord> {
        let fnv1a64 = match self {
            TextTokenizer::Bytes => return None,
            TextTokenizer::Hf(t) => t.fnv1a64(),
            TextTokenizer::Llama2c(t) => t.fnv1a64(),
        };
        Some(TokenizerRecord {
            fnv1a64,
            prepend_bos,
        })
    }

    /// Refuses this tokenizer for a blob converted with another one.
    pub fn check_record(&self, record: Option<TokenizerRecord>) -> Result<()> {
        if let (Some(r), Some(mine)) = (record, self.record(true)) {
            ensure!(
                r.fnv1a64 == mine.fnv1a64,
                "{} (fnv1a64 {:016x}) is not the one the blob was converted with (fnv1a64 {:016x})",
                self.describe(),
                mine.fnv1a64,
                r.fnv1a64
            );
        }
        Ok(())
    }

    /// The BOS token's id, if the tokenizer has one.
    pub fn bos(&self) -> Option<u32> {
        match self {
            TextTokenizer::Bytes => None,
            TextTokenizer::Hf(t) => t.bos(),
            TextTokenizer::Llama2c(_) => Some(llama2c::BOS),
        }
    }

    /// In words, for messages.
    pub fn describe(&self) -> String {
        match self {
            TextTokenizer::Bytes => "the byte tokenizer".into(),
            TextTokenizer::Hf(t) => format!("tokenizer {}", t.path().display()),
            TextTokenizer::Llama2c(t) => format!("tokenizer {}", t.path().display()),
        }
    }

    /// TransformerLens's `to_tokens(text, prepend_bos)`: the text's tokens (without the tokenizer's own
    /// special tokens), after one BOS token when `prepend_bos`. An empty text, a NUL byte and a text
    /// without tokens are errors.
    pub fn encode(&self, text: &str, prepend_bos: bool) -> Result<Encoded> {
        ensure!(!text.is_empty(), "the text is empty");
        if let Some(at) = text.find('\0') {
            bail!("the text holds a NUL byte (at byte {at})");
        }
        let (mut ids, mut offsets) = match self {
            TextTokenizer::Bytes => bytes::encode(text),
            TextTokenizer::Hf(t) => {
                let e = t
                    .inner()
                    .encode(text, false)
                    .map_err(|e| anyhow!("cannot tokenize the text: {e}"))?;
                (e.get_ids().to_vec(), e.get_offsets().to_vec())
            }
            TextTokenizer::Llama2c(t) => {
                let e = t.encode(text.as_bytes())?;
                (e.ids, e.offsets)
            }
        };
        ensure!(
            !ids.is_empty(),
            "{} makes no token of {text:?}",
            self.describe()
        );
        if prepend_bos {
            let bos = self
                .bos()
                .ok_or_else(|| anyhow!("{} has no BOS token to prepend", self.describe()))?;
            ids.insert(0, bos);
            offsets.insert(0, (0, 0));
        }
        Ok(Encoded { ids, offsets })
    }

    /// The one token of `text` (no BOS); `what` names it in the error when the text is not one token.
    pub fn one_token(&self, text: &str, what: &str) -> Result<u32> {
        let e = self.encode(text, false)?;
        match e.ids[..] {
            [id] => Ok(id),
            _ => bail!(
                "{what} {text:?} is {} tokens ({}), not one",
                e.ids.len(),
                self.str_tokens(&e.ids)?
                    .iter()
                    .map(|s| format!("{s:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The text of `ids` (special tokens included).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        match self {
            TextTokenizer::Bytes => Ok(bytes::bytes_text(ids)),
            TextTokenizer::Hf(t) => t
                .inner()
                .decode(ids, false)
                .map_err(|e| anyhow!("cannot decode tokens: {e}")),
            TextTokenizer::Llama2c(t) => Ok(String::from_utf8_lossy(&t.decode(ids)?).into_owned()),
        }
    }

    /// TransformerLens's `to_str_tokens`: each token decoded on its own.
    pub fn str_tokens(&self, ids: &[u32]) -> Result<Vec<String>> {
        ids.iter().map(|&id| self.decode(&[id])).collect()
    }
}
