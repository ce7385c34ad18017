//! llama2.c's `tokenizer.bin` (a SentencePiece BPE vocabulary exported by its `tokenizer.py`), encoding
//! and decoding text as llama2.c's `run.c` does.
//!
//! File: a little-endian `u32` `max_token_length`, then per token (as many as the model's vocabulary)
//! an `f32` score, a `u32` length and that many bytes (SentencePiece's `▁` already a space; `<s>` is
//! `"\n<s>\n"`). Encoding: a dummy-prefix `" "` token, then each UTF-8 character's token, or its bytes'
//! tokens (`byte + 3`) when it has none, then repeatedly the adjacent pair whose concatenation is a
//! token of the highest score (the leftmost of equal scores) merged, until none is. Pieces compare as C
//! strings (up to a NUL byte), as llama2.c's lookup does. Of equal pieces (`tokenizer.py` writes a byte
//! piece `<0x20>` as `" "`, like the piece `▁`), the lowest id that is not a byte token (`3..=258`) is
//! used, as SentencePiece does; llama2.c's binary search may find either.
//! Decoding: a piece after BOS (id 1) loses a leading space; a piece `<0xHH>` is the byte `HH`, and so
//! is byte token `HH + 3` written as `tokenizer.py` writes it, `chr(0xHH)` in UTF-8 (where llama2.c
//! prints those UTF-8 bytes: two for `HH >= 0x80`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};

use super::Encoded;

/// llama2.c's BOS token id.
pub const BOS: u32 = 1;
/// The usual file name.
pub const FILE_NAME: &str = "tokenizer.bin";
/// Ids of byte `b`'s fallback token: `b + BYTE_OFFSET` (after `<unk>`, `<s>`, `</s>`).
const BYTE_OFFSET: u32 = 3;

/// A llama2.c tokenizer.
#[derive(Clone, Debug)]
pub struct Llama2cTokenizer {
    pieces: Vec<Vec<u8>>,
    scores: Vec<f32>,
    /// Piece (as a C string) -> its id (the lowest one not a byte token, among equal pieces).
    ids: HashMap<Vec<u8>, u32>,
    path: PathBuf,
    fnv1a64: u64,
}

/// A piece as llama2.c compares it: up to its first NUL byte.
fn c_str(piece: &[u8]) -> &[u8] {
    piece.split(|&b| b == 0).next().unwrap_or(&[])
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let x = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
}

impl Llama2cTokenizer {
    /// Reads a `tokenizer.bin` of `vocab_size` tokens (at most 16 MiB).
    pub fn load(path: &Path, vocab_size: usize) -> Result<Self> {
        let bytes = crate::io::files::read_bounded(path, 16 << 20)?;
        Self::from_bytes(&bytes, vocab_size, path)
            .with_context(|| format!("tokenizer {}", path.display()))
    }

    /// Parses `tokenizer.bin` bytes holding exactly `vocab_size` tokens (`path` names it in messages).
    pub fn from_bytes(bytes: &[u8], vocab_size: usize, path: &Path) -> Result<Self> {
        let max_len =
            u32_at(bytes, 0).context("tokenizer.bin is shorter than its 4-byte header")?;
        ensure!(
            vocab_size
                .checked_mul(8)
                .is_some_and(|n| n <= bytes.len() - 4),
            "tokenizer.bin ({} bytes) cannot hold {vocab_size} tokens",
            bytes.len()
        );
        let (mut pieces, mut scores) = (Vec::with_capacity(vocab_size), Vec::new());
        let mut at = 4usize;
        for id in 0..vocab_size {
            let (Some(score), Some(len)) = (u32_at(bytes, at), u32_at(bytes, at + 4)) else {
                anyhow::bail!("tokenizer.bin ends in token {id} of {vocab_size}");
            };
            let score = f32::from_bits(score);
            ensure!(
                len <= max_len,
                "tokenizer.bin: token {id} is {len} bytes, more than its max_token_length {max_len}"
            );
            let start = at + 8;
            let piece = bytes
                .get(start..start + len as usize)
                .with_context(|| format!("tokenizer.bin ends in token {id} of {vocab_size}"))?;
            ensure!(
                score.is_finite(),
                "tokenizer.bin: token {id} has a score that is not finite"
            );
            pieces.push(piece.to_vec());
            scores.push(score);
            at = start + len as usize;
        }
        ensure!(
            at == bytes.len(),
            "tokenizer.bin has {} bytes after its {vocab_size} tokens (a vocabulary of another size?)",
            bytes.len() - at
        );
        let mut ids: HashMap<Vec<u8>, u32> = HashMap::with_capacity(vocab_size);
        let byte = |id: u32| (BYTE_OFFSET..BYTE_OFFSET + 256).contains(&id);
        for (id, p) in pieces.iter().enumerate() {
            let id = id as u32;
            let slot = ids.entry(c_str(p).to_vec()).or_insert(id);
            if byte(*slot) && !byte(id) {
                *slot = id;
            }
        }
        Ok(Llama2cTokenizer {
            pieces,
            scores,
            ids,
            path: path.to_path_buf(),
            fnv1a64: super::hf::file_hash(bytes),
        })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// FNV-1a 64 of the file's bytes (the blob's tokenizer record).
    pub fn fnv1a64(&self) -> u64 {
        self.fnv1a64
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Whether there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    fn id(&self, piece: &[u8]) -> Option<u32> {
        self.ids.get(c_str(piece)).copied()
    }

    /// llama2.c's `encode(text, bos = 0, eos = 0)`: the ids, each with the byte range of `text` it
    /// covers (the dummy prefix: `(0, 0)`).
    pub fn encode(&self, text: &[u8]) -> Result<Encoded> {
        let mut tokens: Vec<(u32, (usize, usize))> = Vec::with_capacity(text.len() + 1);
        if !text.is_empty() {
            let space = self
                .id(b" ")
                .context("the tokenizer has no \" \" token for its dummy prefix")?;
            tokens.push((space, (0, 0)));
        }
        let continuation = |b: u8| b & 0xC0 == 0x80;
        let mut start = 0;
        for (i, &c) in text.iter().enumerate() {
            if !continuation(c) {
                start = i;
            }
            let next_continues = text.get(i + 1).is_some_and(|&n| continuation(n));
            if next_continues && i + 1 - start < 4 {
                continue;
            }
            let char_bytes = &text[start..=i];
            match self.id(char_bytes) {
                Some(id) => tokens.push((id, (start, i + 1))),
                None => {
                    for (j, &b) in char_bytes.iter().enumerate() {
                        let id = b as u32 + BYTE_OFFSET;
                        ensure!(
                            (id as usize) < self.len(),
                            "the tokenizer has no byte token for 0x{b:02x}"
                        );
                        tokens.push((id, (start + j, start + j + 1)));
                    }
                }
            }
            start = i + 1;
        }
        let mut pair = Vec::new();
        loop {
            let mut best: Option<(f32, u32, usize)> = None;
            for (i, w) in tokens.windows(2).enumerate() {
                pair.clear();
                pair.extend_from_slice(c_str(&self.pieces[w[0].0 as usize]));
                pair.extend_from_slice(c_str(&self.pieces[w[1].0 as usize]));
                if let Some(id) = self.id(&pair) {
                    let score = self.scores[id as usize];
                    if score > best.map_or(-1e10, |b| b.0) {
                        best = Some((score, id, i));
                    }
                }
            }
            let Some((_, id, i)) = best else { break };
            let (a, b) = (tokens[i].1, tokens[i + 1].1);
            let span = match (a, b) {
                ((0, 0), b) => b,
                (a, b) => (a.0, b.1),
            };
            tokens[i] = (id, span);
            tokens.remove(i + 1);
        }
        let (ids, offsets) = tokens.into_iter().unzip();
        Ok(Encoded { ids, offsets })
    }

    /// llama2.c's `decode(prev, token)`: the bytes `token` prints after `prev` (a byte token its byte).
    pub fn decode_piece(&self, prev: Option<u32>, token: u32) -> Result<Vec<u8>> {
        let piece = self
            .pieces
            .get(token as usize)
            .with_context(|| format!("token {token} is not in the tokenizer's {}", self.len()))?;
        if let Some(b) = token
            .checked_sub(BYTE_OFFSET)
            .and_then(|b| u8::try_from(b).ok())
        {
            let mut utf8 = [0u8; 2];
            if piece.as_slice() == char::from(b).encode_utf8(&mut utf8).as_bytes() {
                return Ok(vec![b]);
            }
        }
        let piece = c_str(piece);
        let piece = match (prev, piece) {
            (Some(BOS), [b' ', rest @ ..]) => rest,
            _ => piece,
        };
        Ok(match byte_piece(piece) {
            Some(b) => vec![b],
            None => piece.to_vec(),
        })
    }

    /// The bytes of `ids` decoded one after the other as llama2.c prints them.
    pub fn decode(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut prev = None;
        for &id in ids {
            out.extend(self.decode_piece(prev, id)?);
            prev = Some(id);
        }
        Ok(out)
    }
}

/// The byte of a piece `<0xHH>` as llama2.c's `sscanf(piece, "<0x%02hhX>")` reads it: `<0x`, optional
/// white space, then one or two hex digits.
fn byte_piece(piece: &[u8]) -> Option<u8> {
    let rest = piece.strip_prefix(b"<0x")?;
    let rest = &rest[rest.iter().take_while(|b| b.is_ascii_whitespace()).count()..];
    let digits: Vec<u8> = rest
        .iter()
        .take(2)
        .take_while(|b| b.is_ascii_hexdigit())
        .copied()
        .collect();
    let text = std::str::from_utf8(&digits).ok()?;
    u8::from_str_radix(text, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tokenizer of `pieces` with their scores.
    fn bin(pieces: &[(&[u8], f32)]) -> Vec<u8> {
        let max = pieces.iter().map(|p| p.0.len()).max().unwrap_or(0) as u32;
        let mut b = max.to_le_bytes().to_vec();
        for (p, s) in pieces {
            b.extend(s.to_le_bytes());
            b.extend((p.len() as u32).to_le_bytes());
            b.extend(*p);
        }
        b
    }

    fn vocab() -> Vec<(Vec<u8>, f32)> {
        let mut v: Vec<(Vec<u8>, f32)> = vec![
            (b"<unk>".to_vec(), 0.0),
            (b"\n<s>\n".to_vec(), 0.0),
            (b"\n</s>\n".to_vec(), 0.0),
        ];
        v.extend((0..=255u8).map(|b| (format!("<0x{b:02X}>").into_bytes(), 0.0)));
        for (p, s) in [
            (" ", -1.0),
            ("a", -2.0),
            ("b", -3.0),
            ("ab", -4.0),
            (" ab", -5.0),
            (" a", -0.5),
            ("é", -6.0),
        ] {
            v.push((p.as_bytes().to_vec(), s));
        }
        v
    }

    fn tokenizer() -> Llama2cTokenizer {
        let v = vocab();
        let pieces: Vec<(&[u8], f32)> = v.iter().map(|(p, s)| (p.as_slice(), *s)).collect();
        Llama2cTokenizer::from_bytes(&bin(&pieces), v.len(), Path::new("t.bin")).unwrap()
    }

    #[test]
    fn merges_by_score_and_falls_back_to_bytes() {
        let t = tokenizer();
        let id = |p: &str| t.id(p.as_bytes()).unwrap();
        // " ab": " a" (-0.5) beats "ab" (-4.0), then " a" + "b" merges into " ab".
        let e = t.encode(b"ab").unwrap();
        assert_eq!(e.ids, vec![id(" ab")]);
        assert_eq!(e.offsets, vec![(0, 2)]);
        // "ba": "b" + "a" is no token, " b" neither.
        let e = t.encode(b"ba").unwrap();
        assert_eq!(e.ids, vec![id(" "), id("b"), id("a")]);
        assert_eq!(e.offsets, vec![(0, 0), (0, 1), (1, 2)]);
        // "é" is a token; "ü" (C3 BC) is not: its two bytes' tokens.
        let ids = t.encode("éü".as_bytes()).unwrap().ids;
        assert_eq!(ids, vec![id(" "), id("é"), 0xC3 + 3, 0xBC + 3]);
        assert_eq!(t.decode(&ids).unwrap(), " éü".as_bytes());
        // After BOS a leading space is dropped.
        assert_eq!(t.decode(&[BOS, id(" a")]).unwrap(), b"\n<s>\na");
        assert!(t.encode(b"").unwrap().ids.is_empty());
    }

    /// SentencePiece's ids and text for the fixture strings (`tests/fixtures/llama2c_tokenizer`).
    #[test]
    fn encodes_and_decodes_as_sentencepiece_on_the_fixture() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/llama2c_tokenizer");
        let golden: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("golden.json")).unwrap())
                .unwrap();
        let vocab = golden["vocab_size"].as_u64().unwrap() as usize;
        let t = Llama2cTokenizer::load(&dir.join(FILE_NAME), vocab).unwrap();
        let cases = golden["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 10);
        for case in cases {
            let text = case["text"].as_str().unwrap();
            let want: Vec<u32> = case["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as u32)
                .collect();
            let Encoded { ids, offsets } = t.encode(text.as_bytes()).unwrap();
            assert_eq!(ids, want, "{text:?}");
            assert_eq!(offsets.last().unwrap().1, text.len(), "{text:?}");
            // As llama2.c prints a generation: each token after the one before, starting after BOS.
            let mut with_bos = vec![BOS];
            with_bos.extend(&ids);
            let printed: Vec<u8> = (1..with_bos.len())
                .flat_map(|i| t.decode_piece(Some(with_bos[i - 1]), with_bos[i]).unwrap())
                .collect();
            assert_eq!(printed, case["decoded"].as_str().unwrap().as_bytes());
        }
    }

    #[test]
    fn bad_files_are_one_line_errors() {
        let v = vocab();
        let pieces: Vec<(&[u8], f32)> = v.iter().map(|(p, s)| (p.as_slice(), *s)).collect();
        let good = bin(&pieces);
        let path = Path::new("t.bin");
        for (bytes, n, want) in [
            (&good[..2], v.len(), "shorter"),
            (&good[..], v.len() + 1, "ends in token"),
            (&good[..], 1 << 40, "cannot hold"),
            (&good[..], v.len() - 1, "after its"),
            (&good[..good.len() - 1], v.len(), "ends in token"),
        ] {
            let err = Llama2cTokenizer::from_bytes(bytes, n, path)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err:?} lacks {want:?}");
        }
        let mut long = good.clone();
        long[..4].copy_from_slice(&1u32.to_le_bytes());
        let err = Llama2cTokenizer::from_bytes(&long, v.len(), path).unwrap_err();
        assert!(err.to_string().contains("max_token_length"));
    }
}
