//! HuggingFace `tokenizer.json` files, as `--tokenizer` and `convert` read them, and the text they then
//! tokenize: the input's first byte is the length of a text taken from its end, the bytes between are
//! the file. Parsed or refused with an error; a parsed tokenizer encodes, decodes and reads back its
//! tokens' texts with errors, never a crash.

use microlens_host::text::hf::HfTokenizer;
use microlens_host::text::TextTokenizer;
use std::path::Path;

/// One input of the target.
pub fn run(data: &[u8]) {
    let Some((&text_len, rest)) = data.split_first() else {
        return;
    };
    let (file, text) = rest.split_at(rest.len().saturating_sub(text_len as usize));
    let Ok(tokenizer) = HfTokenizer::from_bytes(file, Path::new("fuzz/tokenizer.json")) else {
        return;
    };
    let _ = tokenizer.check_vocab(1 << 16);
    let tokenizer = TextTokenizer::Hf(Box::new(tokenizer));
    let text = String::from_utf8_lossy(text);
    for prepend_bos in [false, true] {
        if let Ok(encoded) = tokenizer.encode(&text, prepend_bos) {
            assert_eq!(encoded.ids.len(), encoded.offsets.len());
            let _ = tokenizer.decode(&encoded.ids);
            let _ = tokenizer.str_tokens(&encoded.ids);
        }
    }
}
