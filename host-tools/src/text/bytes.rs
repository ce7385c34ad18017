//! The byte tokenizer of byte-level models (`d_vocab` 256): token `b` is the byte `b`, no BOS token.

/// Vocabulary size of a byte-level model: token `b` is the byte `b`.
pub const BYTE_VOCAB: usize = 256;

/// Bytes as text (invalid UTF-8 replaced by U+FFFD).
pub fn bytes_text(tokens: &[u32]) -> String {
    let bytes: Vec<u8> = tokens.iter().map(|&t| t as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The byte tokens of `text` with each one's byte range.
pub fn encode(text: &str) -> (Vec<u32>, Vec<(usize, usize)>) {
    text.bytes()
        .enumerate()
        .map(|(i, b)| (u32::from(b), (i, i + 1)))
        .unzip()
}
