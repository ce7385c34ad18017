//! The tokens of a part of a text (a subject in a prompt), found from the tokenizer's offsets.

use std::ops::Range;

use anyhow::{bail, ensure, Result};

use super::Encoded;

/// The positions of the tokens that overlap the first occurrence of `part` in `text` (`encoded` is
/// `text` tokenized): for `"The Eiffel Tower is in"` and `"The Eiffel Tower"`, the tokens of those three
/// words. An error if `part` is empty or not in `text`.
pub fn token_range(text: &str, encoded: &Encoded, part: &str) -> Result<Range<usize>> {
    ensure!(!part.is_empty(), "the subject text is empty");
    let Some(start) = text.find(part) else {
        bail!("the subject {part:?} is not in the prompt {text:?}");
    };
    let end = start + part.len();
    let hits: Vec<usize> = encoded
        .offsets
        .iter()
        .enumerate()
        .filter(|(_, &(s, e))| e > s && s < end && e > start)
        .map(|(i, _)| i)
        .collect();
    match (hits.first(), hits.last()) {
        (Some(&a), Some(&b)) => Ok(a..b + 1),
        _ => bail!("the subject {part:?} covers no token of the prompt {text:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(offsets: &[(usize, usize)]) -> Encoded {
        Encoded {
            ids: (0..offsets.len() as u32).collect(),
            offsets: offsets.to_vec(),
        }
    }

    #[test]
    fn the_tokens_overlapping_the_part() {
        // "<bos>The Eiffel Tower is": BOS, "The", " E", "iffel", " Tower", " is".
        let e = enc(&[(0, 0), (0, 3), (3, 5), (5, 10), (10, 16), (16, 19)]);
        let text = "The Eiffel Tower is";
        assert_eq!(token_range(text, &e, "The Eiffel Tower").unwrap(), 1..5);
        assert_eq!(token_range(text, &e, "Eiffel").unwrap(), 2..4);
        assert_eq!(token_range(text, &e, "is").unwrap(), 5..6);
        let err = token_range(text, &e, "Rome").unwrap_err().to_string();
        assert!(err.contains("not in the prompt"), "{err}");
        assert!(token_range(text, &e, "").is_err());
    }
}
