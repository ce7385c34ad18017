//! Windows of real text for `fidelity --text-file`: a UTF-8 file tokenized once and cut into
//! consecutive windows.

use std::path::Path;

use anyhow::{anyhow, bail, ensure, Result};

use super::TextTokenizer;
use crate::io::files::read_bounded;

/// Largest text file read for `fidelity --text-file` (bytes).
pub const MAX_TEXT_BYTES: u64 = 256 << 20;

/// A UTF-8 text file of at most [`MAX_TEXT_BYTES`]; not UTF-8 (naming the first bad byte), a NUL byte,
/// or nothing but whitespace is an error.
pub fn read_text_file(path: &Path) -> Result<String> {
    let bytes = read_bounded(path, MAX_TEXT_BYTES)?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => bail!(
            "{} is not UTF-8 text (byte {} is not valid UTF-8)",
            path.display(),
            e.utf8_error().valid_up_to()
        ),
    };
    if let Some(at) = text.find('\0') {
        bail!("{} holds a NUL byte (at byte {at})", path.display());
    }
    ensure!(!text.trim().is_empty(), "{} holds no text", path.display());
    Ok(text)
}

/// The text's tokens cut into consecutive windows of `seq_len` tokens, each starting with the BOS token
/// when `prepend_bos` (then `seq_len - 1` text tokens each); the last, shorter window is dropped unless
/// it is the only one.
pub fn windows(
    tok: &TextTokenizer,
    text: &str,
    seq_len: usize,
    prepend_bos: bool,
) -> Result<Vec<Vec<u32>>> {
    let bos = match prepend_bos {
        true => Some(
            tok.bos()
                .ok_or_else(|| anyhow!("{} has no BOS token to prepend", tok.describe()))?,
        ),
        false => None,
    };
    let body = seq_len - usize::from(bos.is_some());
    ensure!(
        body > 0,
        "--seq-len {seq_len} leaves no room for text after the BOS token"
    );
    let ids = tok.encode(text, false)?.ids;
    let mut out: Vec<Vec<u32>> = ids
        .chunks(body)
        .filter(|c| c.len() == body)
        .map(|c| bos.into_iter().chain(c.iter().copied()).collect())
        .collect();
    if out.is_empty() {
        out.push(bos.into_iter().chain(ids).collect());
    }
    Ok(out)
}
