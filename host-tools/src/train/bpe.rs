//! A byte-pair-encoding vocabulary learned from text, in llama2.c's `tokenizer.bin` layout, so that
//! [`crate::text::llama2c::Llama2cTokenizer`] (llama2.c's `encode`/`decode`) reads and applies it.
//!
//! Ids: 0 `<unk>`, 1 `"\n<s>\n"` (BOS), 2 `"\n</s>\n"`, 3..=258 the byte pieces `<0xHH>` (the
//! fallback of a character without a piece), then every character of the text (sorted), then the
//! merges in the order learned. A merge's score is minus its rank, so llama2.c's encoder (merge the
//! adjacent pair whose concatenation has the highest score, repeatedly) applies them in that order;
//! the other pieces score below every merge. Training starts each text as the encoder does (a dummy
//! prefix `" "`, one piece per character), counts adjacent pairs within texts, and merges the most
//! frequent (ties: the smallest concatenation, then the smallest ids) everywhere, left to right.

use std::collections::{BTreeSet, HashMap};

use anyhow::{ensure, Result};

/// Pieces before the characters: `<unk>`, BOS, EOS and the 256 bytes.
pub const FIXED: usize = 3 + 256;
/// Largest vocabulary accepted.
pub const MAX_VOCAB: usize = 1 << 16;

/// A learned vocabulary: pieces and scores, by id.
#[derive(Clone, Debug, PartialEq)]
pub struct Vocab {
    /// Each token's bytes.
    pub pieces: Vec<Vec<u8>>,
    /// Each token's score.
    pub scores: Vec<f32>,
}

/// Score of the pieces that are not merges: below every merge's `-rank`.
const BASE_SCORE: f32 = -1e6;

/// Learns a vocabulary of `vocab_size` tokens from `texts` (each encoded on its own, as llama2.c
/// encodes a prompt). Fewer merges are learned if the texts run out of pairs.
pub fn train(texts: &[String], vocab_size: usize) -> Result<Vocab> {
    ensure!(
        texts.iter().any(|t| !t.is_empty()),
        "a tokenizer needs some text to learn from"
    );
    let chars: BTreeSet<char> = texts.iter().flat_map(|t| t.chars()).chain([' ']).collect();
    ensure!(
        (FIXED + chars.len()..=MAX_VOCAB).contains(&vocab_size),
        "a vocabulary of {vocab_size}: these texts need {} to {MAX_VOCAB} (259 fixed pieces and {} characters)",
        FIXED + chars.len(),
        chars.len()
    );
    let mut pieces: Vec<Vec<u8>> =
        vec![b"<unk>".to_vec(), b"\n<s>\n".to_vec(), b"\n</s>\n".to_vec()];
    pieces.extend((0..=255u8).map(|b| format!("<0x{b:02X}>").into_bytes()));
    let mut ids: HashMap<Vec<u8>, u32> = HashMap::new();
    for c in &chars {
        ids.insert(c.to_string().into_bytes(), pieces.len() as u32);
        pieces.push(c.to_string().into_bytes());
    }
    let mut scores = vec![BASE_SCORE; pieces.len()];
    let mut seqs: Vec<Vec<u32>> = texts
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| {
            let mut s = vec![ids[b" ".as_slice()]];
            s.extend(t.chars().map(|c| ids[c.to_string().as_bytes()]));
            s
        })
        .collect();
    let mut rank = 0u32;
    while pieces.len() < vocab_size {
        let Some((a, b)) = most_frequent_pair(&seqs, &pieces) else {
            break;
        };
        let joined = [pieces[a as usize].as_slice(), &pieces[b as usize]].concat();
        let id = match ids.get(&joined) {
            Some(&id) => id,
            None => {
                let id = pieces.len() as u32;
                ids.insert(joined.clone(), id);
                pieces.push(joined);
                scores.push(-(rank as f32));
                rank += 1;
                id
            }
        };
        for s in &mut seqs {
            merge(s, a, b, id);
        }
    }
    Ok(Vocab { pieces, scores })
}

/// The adjacent pair that occurs most often (ties: the smallest concatenation, then the smallest
/// ids), `None` if no text has two tokens.
fn most_frequent_pair(seqs: &[Vec<u32>], pieces: &[Vec<u8>]) -> Option<(u32, u32)> {
    let mut counts: HashMap<(u32, u32), u64> = HashMap::new();
    for s in seqs {
        for w in s.windows(2) {
            *counts.entry((w[0], w[1])).or_insert(0) += 1;
        }
    }
    let key = |&(a, b): &(u32, u32)| {
        let joined = [pieces[a as usize].as_slice(), &pieces[b as usize]].concat();
        (joined, a, b)
    };
    let mut best: Option<((u32, u32), u64)> = None;
    for (&pair, &n) in &counts {
        best = match best {
            Some((p, m)) if m > n || (m == n && key(&p) <= key(&pair)) => Some((p, m)),
            _ => Some((pair, n)),
        };
    }
    best.map(|(p, _)| p)
}

/// Replaces every `a b` in `s` by `id`, left to right, without overlaps.
fn merge(s: &mut Vec<u32>, a: u32, b: u32, id: u32) {
    let mut out = 0;
    let mut i = 0;
    while i < s.len() {
        if i + 1 < s.len() && s[i] == a && s[i + 1] == b {
            s[out] = id;
            i += 2;
        } else {
            s[out] = s[i];
            i += 1;
        }
        out += 1;
    }
    s.truncate(out);
}

impl Vocab {
    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Whether it has no tokens (never, once trained).
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The `tokenizer.bin` bytes: a little-endian `u32` longest piece length, then per token its `f32`
    /// score, its `u32` length and its bytes.
    pub fn to_tokenizer_bin(&self) -> Vec<u8> {
        let longest = self.pieces.iter().map(Vec::len).max().unwrap_or(0) as u32;
        let mut out = longest.to_le_bytes().to_vec();
        for (piece, score) in self.pieces.iter().zip(&self.scores) {
            out.extend(score.to_le_bytes());
            out.extend((piece.len() as u32).to_le_bytes());
            out.extend(piece);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::llama2c::Llama2cTokenizer;
    use crate::train::stories::stories;
    use std::path::Path;

    #[test]
    fn the_file_encodes_and_decodes_as_llama2c_does_and_compresses() -> Result<()> {
        let texts = stories(5, 300);
        let vocab = train(&texts, 512)?;
        assert_eq!(vocab.len(), 512);
        let bin = vocab.to_tokenizer_bin();
        assert_eq!(
            bin,
            train(&texts, 512)?.to_tokenizer_bin(),
            "not deterministic"
        );
        let tok = Llama2cTokenizer::from_bytes(&bin, 512, Path::new("tokenizer.bin"))?;
        let held_out = stories(99, 50);
        let (mut chars, mut tokens) = (0, 0);
        for s in held_out.iter().chain(&texts[..20]) {
            let ids = tok.encode(s.as_bytes())?.ids;
            // The dummy prefix's space comes back: decoding without a BOS keeps it.
            assert_eq!(tok.decode(&ids)?, format!(" {s}").into_bytes());
            chars += s.len();
            tokens += ids.len();
        }
        let ratio = chars as f64 / tokens as f64;
        assert!(ratio > 2.3, "{ratio:.2} bytes per token");
        // Characters never seen fall back to bytes, and still decode.
        let odd = "Zebra-\u{e9}clair ~ 42";
        assert_eq!(
            tok.decode(&tok.encode(odd.as_bytes())?.ids)?,
            format!(" {odd}").into_bytes()
        );
        Ok(())
    }

    #[test]
    fn impossible_vocabularies_are_refused() {
        let texts = vec!["abc".to_string()];
        assert!(train(&texts, 259).is_err());
        assert!(train(&texts, MAX_VOCAB + 1).is_err());
        assert!(train(&[String::new()], 300).is_err());
        let v = train(&texts, 300).unwrap();
        assert!(v.len() <= 300 && v.len() >= FIXED + 4);
    }
}
