//! HuggingFace `tokenizer.json` files, parsed by the `tokenizers` crate (no network): read with a size
//! bound, identified by the FNV-1a 64 of their bytes (what a blob records), with their BOS token, checked
//! against a model's vocabulary.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, ensure, Result};
use microlens::blob::TokenizerRecord;

use crate::hash::Fnv1a64;
use crate::io::files::read_bounded;

/// The tokenizer file looked for beside a checkpoint (by `convert`) and beside a blob.
pub const FILE_NAME: &str = "tokenizer.json";
/// Largest `tokenizer.json` read (bytes): the largest published ones are a few tens of MB.
pub const MAX_TOKENIZER_BYTES: u64 = 64 << 20;
/// Largest `tokenizer_config.json` read (bytes).
const MAX_CONFIG_BYTES: u64 = 4 << 20;
/// BOS tokens recognised when no `tokenizer_config.json` names one (GPT-2's is `<|endoftext|>`).
const BOS_CANDIDATES: [&str; 4] = ["<|endoftext|>", "<s>", "<|begin_of_text|>", "<bos>"];

/// A loaded `tokenizer.json`.
pub struct HfTokenizer {
    inner: tokenizers::Tokenizer,
    bos: Option<u32>,
    fnv1a64: u64,
    path: PathBuf,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HfTokenizer({}, {:016x})",
            self.path.display(),
            self.fnv1a64
        )
    }
}

/// `blob` with the tokenizer record `record` (unchanged when `None`): what a blob written from another
/// model keeps of it.
pub fn with_record(blob: Vec<u8>, record: Option<TokenizerRecord>) -> Result<Vec<u8>> {
    match record {
        None => Ok(blob),
        Some(r) => microlens::blob::with_tokenizer(&blob, Some(r))
            .map_err(|e| anyhow!("cannot record the tokenizer in the blob: {e}")),
    }
}

/// FNV-1a 64 of a tokenizer file's bytes.
pub fn file_hash(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a64::new();
    h.write(bytes);
    h.finish()
}

impl HfTokenizer {
    /// Reads and parses `path` (at most [`MAX_TOKENIZER_BYTES`]); the BOS token is the one a
    /// `tokenizer_config.json` beside it names, else the first of `<|endoftext|>`, `<s>`,
    /// `<|begin_of_text|>`, `<bos>` in the vocabulary, else none.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = read_bounded(path, MAX_TOKENIZER_BYTES)?;
        let mut tokenizer = Self::from_bytes(&bytes, path)?;
        tokenizer.bos = bos_token(&tokenizer.inner, path)?;
        Ok(tokenizer)
    }

    /// Parses the bytes of a `tokenizer.json` (named `path` in messages), with the BOS token the first
    /// of [`BOS_CANDIDATES`] it knows; no other file is read.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Self> {
        ensure!(
            bytes.len() as u64 <= MAX_TOKENIZER_BYTES,
            "{} is larger than {MAX_TOKENIZER_BYTES} bytes",
            path.display()
        );
        // JSON first (serde_json bounds the nesting): `tokenizers` panics on some malformed parts.
        let not_tokenizer = |e: serde_json::Error| {
            anyhow!(
                "{} is not a HuggingFace tokenizer.json: {e}",
                path.display()
            )
        };
        let json: serde_json::Value = serde_json::from_slice(bytes).map_err(not_tokenizer)?;
        let inner: tokenizers::Tokenizer = serde_json::from_value(json).map_err(not_tokenizer)?;
        let bos = candidate_bos(&inner);
        Ok(HfTokenizer {
            inner,
            bos,
            fnv1a64: file_hash(bytes),
            path: path.to_path_buf(),
        })
    }

    /// The `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
    /// The BOS token's id.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }
    /// FNV-1a 64 of the file's bytes.
    pub fn fnv1a64(&self) -> u64 {
        self.fnv1a64
    }
    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Refuses a tokenizer with an id a model of `d_vocab` tokens has no embedding for.
    pub fn check_vocab(&self, d_vocab: usize) -> Result<()> {
        let max = self.inner.get_vocab(true).into_values().max();
        if let Some(max) = max.filter(|&m| m as usize >= d_vocab) {
            bail!(
                "tokenizer {} has ids up to {max}, but the model's d_vocab is {d_vocab}",
                self.path.display()
            );
        }
        Ok(())
    }
}

/// The BOS token: `bos_token` of a `tokenizer_config.json` beside `path` (a string, or an object with
/// `content`; null: none), else the first of [`BOS_CANDIDATES`] the tokenizer knows.
fn bos_token(tok: &tokenizers::Tokenizer, path: &Path) -> Result<Option<u32>> {
    let config = path.with_file_name("tokenizer_config.json");
    if config.is_file() {
        let text = read_bounded(&config, MAX_CONFIG_BYTES)?;
        let json: serde_json::Value = serde_json::from_slice(&text)
            .map_err(|e| anyhow!("{} is not JSON: {e}", config.display()))?;
        let name = match &json["bos_token"] {
            serde_json::Value::String(s) => Some(s.as_str()),
            v => v["content"].as_str(),
        };
        return match name {
            None => Ok(None),
            Some(name) => tok.token_to_id(name).map(Some).ok_or_else(|| {
                anyhow!(
                    "{}: bos_token {name:?} is not in {}",
                    config.display(),
                    path.display()
                )
            }),
        };
    }
    Ok(candidate_bos(tok))
}

/// The first of [`BOS_CANDIDATES`] the tokenizer knows.
fn candidate_bos(tok: &tokenizers::Tokenizer) -> Option<u32> {
    BOS_CANDIDATES.iter().find_map(|t| tok.token_to_id(t))
}

/// The tokenizer file `convert` records for `checkpoint`: `explicit`, else `tokenizer.json` beside the
/// checkpoint, else llama2.c's `tokenizer.bin` beside it, else none; with TransformerLens's
/// `default_prepend_bos` from the `config` JSON (true when it does not say, as in TransformerLens).
pub fn for_checkpoint(
    checkpoint: &Path,
    explicit: Option<&Path>,
    config: &Path,
) -> Result<Option<(PathBuf, bool)>> {
    let beside = [FILE_NAME, super::llama2c::FILE_NAME].map(|n| checkpoint.with_file_name(n));
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => match beside.into_iter().find(|p| p.is_file()) {
            Some(p) => p,
            None => return Ok(None),
        },
    };
    let prepend_bos = match read_bounded(config, MAX_CONFIG_BYTES) {
        Ok(bytes) => serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v["default_prepend_bos"].as_bool())
            .unwrap_or(true),
        Err(_) => true,
    };
    Ok(Some((path, prepend_bos)))
}
