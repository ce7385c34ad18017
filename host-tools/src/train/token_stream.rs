//! Tokenised text as llama2.c trains on it: every document encoded after a BOS token, the documents
//! one stream, training sequences drawn as windows of it at random offsets.

use anyhow::{ensure, Result};
use rand::Rng;
use rayon::prelude::*;

use super::sequence::Sequence;
use crate::text::llama2c::{Llama2cTokenizer, BOS};

/// Documents as one stream of token ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenStream {
    tokens: Vec<u32>,
    bytes: usize,
}

impl TokenStream {
    /// `docs` encoded with `tokenizer`, each after a BOS token, in order (encoded in parallel).
    pub fn new(tokenizer: &Llama2cTokenizer, docs: &[String]) -> Result<Self> {
        let encoded: Vec<Vec<u32>> = docs
            .par_iter()
            .map(|d| Ok(tokenizer.encode(d.as_bytes())?.ids))
            .collect::<Result<_>>()?;
        let mut tokens = Vec::with_capacity(encoded.iter().map(|e| e.len() + 1).sum());
        for ids in encoded {
            tokens.push(BOS);
            tokens.extend(ids);
        }
        Ok(TokenStream {
            tokens,
            bytes: docs.iter().map(String::len).sum(),
        })
    }

    /// The stream's token ids.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Text bytes per token (the tokenizer's compression on these documents).
    pub fn bytes_per_token(&self) -> f64 {
        self.bytes as f64 / self.tokens.len().max(1) as f64
    }

    /// `batch` windows of `n_ctx` tokens at offsets drawn uniformly from `rng`. Their repeated part is
    /// empty (they train the next-token loss on every position; [`Sequence::is_predictable`] is false).
    pub fn sample(&self, rng: &mut impl Rng, n_ctx: usize, batch: usize) -> Result<Vec<Sequence>> {
        ensure!(
            self.tokens.len() > n_ctx,
            "the corpus has {} tokens, fewer than a window of {}",
            self.tokens.len(),
            n_ctx + 1
        );
        let last = self.tokens.len() - n_ctx;
        Ok((0..batch)
            .map(|_| {
                let at = rng.random_range(0..=last);
                Sequence {
                    tokens: self.tokens[at..at + n_ctx].to_vec(),
                    prefix_len: 0,
                    segment_len: n_ctx,
                }
            })
            .collect())
    }
}
