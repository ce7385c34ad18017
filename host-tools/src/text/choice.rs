//! Which tokenizer a model's text goes through, and whether it gets a BOS token.

use std::path::Path;

use anyhow::{bail, Result};
use microlens::Model;

use super::bytes::BYTE_VOCAB;
use super::hf::FILE_NAME;
use super::TextTokenizer;

/// A model's tokenizer and its BOS default.
#[derive(Debug)]
pub struct TextSide {
    /// The tokenizer, if the model has one (`None`: token ids only).
    pub tokenizer: Option<TextTokenizer>,
    /// Whether text gets a BOS token first unless told otherwise: TransformerLens's
    /// `default_prepend_bos` as the blob records it (true when it records nothing), if the tokenizer
    /// has a BOS token.
    pub default_prepend_bos: bool,
    /// Why there is no tokenizer, for the error when text is given.
    missing: String,
}

impl TextSide {
    /// The tokenizer, or why text cannot be read for this model.
    pub fn tokenizer(&self) -> Result<&TextTokenizer> {
        match &self.tokenizer {
            Some(t) => Ok(t),
            None => bail!("{}", self.missing),
        }
    }

    /// The BOS choice: `asked` (from `--prepend-bos` / `--no-prepend-bos`), else the default.
    pub fn prepend_bos(&self, asked: Option<bool>) -> bool {
        asked.unwrap_or(self.default_prepend_bos)
    }

    /// TransformerLens's `to_str_tokens` of `ids`, if the model has a tokenizer.
    pub fn str_tokens(&self, ids: &[u32]) -> Result<Option<Vec<String>>> {
        self.tokenizer
            .as_ref()
            .map(|t| t.str_tokens(ids))
            .transpose()
    }
}

/// The tokenizer of the model in `blob_path`: `explicit` (`--tokenizer FILE`), else, when the blob
/// records one, `tokenizer.json` (else llama2.c's `tokenizer.bin`) beside the blob, else the byte
/// tokenizer for a byte-level model (`d_vocab` 256 and no tokenizer recorded). A tokenizer other than
/// the one the blob records, or with ids beyond `d_vocab`, is refused.
pub fn for_model(model: &Model<'_>, explicit: Option<&Path>, blob_path: &Path) -> Result<TextSide> {
    let record = model.tokenizer();
    let d_vocab = model.config().d_vocab;
    let beside = [FILE_NAME, super::llama2c::FILE_NAME]
        .map(|n| blob_path.with_file_name(n))
        .into_iter()
        .find(|p| record.is_some() && p.is_file());
    let path = explicit.or(beside.as_deref());
    let tokenizer = match path {
        Some(p) => {
            let t = TextTokenizer::load(p, d_vocab)?;
            t.check_record(record)?;
            Some(t)
        }
        None if record.is_none() && d_vocab == BYTE_VOCAB => Some(TextTokenizer::Bytes),
        None => None,
    };
    let missing = match record {
        Some(r) => format!(
            "the blob was converted with a tokenizer (fnv1a64 {:016x}): give it with --tokenizer \
             FILE or put it beside the blob as {FILE_NAME}",
            r.fnv1a64
        ),
        None => format!(
            "text needs a tokenizer: give --tokenizer FILE (a HuggingFace {FILE_NAME}), or token \
             ids (d_vocab {d_vocab})"
        ),
    };
    let has_bos = tokenizer.as_ref().and_then(TextTokenizer::bos).is_some();
    Ok(TextSide {
        default_prepend_bos: has_bos && record.is_none_or(|r| r.prepend_bos),
        tokenizer,
        missing,
    })
}
