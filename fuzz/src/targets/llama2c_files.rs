//! llama2.c files, as `convert` and `--tokenizer` read them. The first byte chooses: even, a checkpoint
//! `.bin` (the rest; parsed, or refused with an error, and a parsed one's weights laid out as a TL
//! state dict); odd, a `tokenizer.bin` whose vocabulary size is the next two bytes (little-endian),
//! the text to tokenize taken from the end (its length the fourth byte), the file between. A parsed
//! tokenizer encodes and decodes with errors, never a crash.

use microlens_host::import::llama2c;
use microlens_host::text::llama2c::Llama2cTokenizer;
use std::path::Path;

/// One input of the target.
pub fn run(data: &[u8]) {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    if kind % 2 == 0 {
        if let Ok(m) = llama2c::parse(rest) {
            let _ = m.weights.into_state_dict(&m.config);
        }
        return;
    }
    let [v0, v1, text_len, rest @ ..] = rest else {
        return;
    };
    let vocab = u16::from_le_bytes([*v0, *v1]) as usize;
    let (file, text) = rest.split_at(rest.len().saturating_sub(*text_len as usize));
    let Ok(t) = Llama2cTokenizer::from_bytes(file, vocab, Path::new("fuzz/tokenizer.bin")) else {
        return;
    };
    if let Ok(e) = t.encode(text) {
        assert_eq!(e.ids.len(), e.offsets.len());
        assert!(e.offsets.iter().all(|&(a, b)| a <= b && b <= text.len()));
        let _ = t.decode(&e.ids);
    }
}
