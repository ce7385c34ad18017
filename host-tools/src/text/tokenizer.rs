//! One tokenizer for every command: a HuggingFace tokenizer or the byte tokenizer, with
//! TransformerLens's `to_tokens` (one BOS first when asked, never two) and `to_str_tokens`.

use anyhow::{anyhow, bail, ensure, Result};

use super::bytes;
use super::hf::HfTokenizer;

/// A tokenizer of text for a model.
#[derive(Debug)]
pub enum TextTokenizer {
    /// Byte-level models: token `b` is the byte `b`, no BOS token.
    Bytes,
    /// A HuggingFace `tokenizer.json`.
    Hf(Box<HfTokenizer>),
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
    /// The BOS token's id, if the tokenizer has one.
    pub fn bos(&self) -> Option<u32> {
        match self {
            TextTokenizer::Bytes => None,
            TextTokenizer::Hf(t) => t.bos(),
        }
    }

    /// In words, for messages.
    pub fn describe(&self) -> String {
        match self {
            TextTokenizer::Bytes => "the byte tokenizer".into(),
            TextTokenizer::Hf(t) => format!("tokenizer {}", t.path().display()),
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
        }
    }

    /// TransformerLens's `to_str_tokens`: each token decoded on its own.
    pub fn str_tokens(&self, ids: &[u32]) -> Result<Vec<String>> {
        ids.iter().map(|&id| self.decode(&[id])).collect()
    }
}
