//! The prompt: a random prefix, then a random segment of distinct tokens, repeated once; for a
//! byte-level model, an English phrase repeated once; for a text prompt, its tokens repeated once.
//!
//! The second copy of the segment is predictable only by induction (look back for the previous
//! occurrence of the current token, predict the token that followed it): accuracy and the induction
//! scores are measured there. Segment tokens are distinct, so that the earlier occurrence is unique (in
//! the phrase, bytes recur: the model must tell the occurrences apart by what precedes them). The
//! tokens come from the core's generator ([`microlens::analysis::sequences`]), seeded by
//! [`crate::model::SEED`].

use microlens::analysis::sequences::{self, fill_repeated, Draw, Random, SplitMix64};
use microlens::Config;

use crate::model::{Token, N_CTX};

/// The English phrase a byte-level model's prompt repeats: not in its held-out sentences, and its
/// training text is random words.
pub const PHRASE: &[u8] = b"tiny models read text. ";

/// A generated prompt and where its parts are.
pub struct Prompt {
    tokens: [Token; N_CTX],
    prefix_len: usize,
    segment_len: usize,
}

impl Prompt {
    /// The prompt of the model: [`Prompt::phrase`] with a text prompt's tokens
    /// ([`crate::model::TEXT_PROMPT`]), or with [`PHRASE`] for a byte-level model, else
    /// [`Prompt::generate`] from `seed`.
    pub fn for_model(seed: u64, cfg: &Config) -> Self {
        match (crate::model::TEXT_PROMPT, crate::model::BYTES) {
            (text, _) if !text.is_empty() => Self::phrase(text, cfg),
            (_, true) => Self::phrase(PHRASE, cfg),
            _ => Self::generate(seed, cfg),
        }
    }

    /// `phrase` twice (no prefix: bytes of a byte-level model, or token ids), cut to fit twice in the
    /// context with room for a continuation of a quarter of it.
    pub fn phrase<T: Copy + Into<Token>>(phrase: &[T], cfg: &Config) -> Self {
        let n_ctx = cfg.n_ctx.min(N_CTX);
        let segment_len = phrase.len().min(3 * n_ctx / 8);
        let mut tokens: [Token; N_CTX] = [0; N_CTX];
        for (i, &b) in phrase[..segment_len].iter().enumerate() {
            tokens[i] = b.into();
            tokens[i + segment_len] = b.into();
        }
        Prompt {
            tokens,
            prefix_len: 0,
            segment_len,
        }
    }

    /// The prompt for `seed`: a prefix of up to a quarter of the context, then the longest segment
    /// (at most `d_vocab` distinct tokens) that fits twice in what is left.
    pub fn generate(seed: u64, cfg: &Config) -> Self {
        let mut rng = SplitMix64::new(seed);
        let n_ctx = cfg.n_ctx.min(N_CTX);
        let vocab = cfg.d_vocab.min(<Token as sequences::Token>::LIMIT as usize);
        let prefix_len = rng.below((n_ctx / 4 + 1) as u32) as usize;
        let segment_len = ((n_ctx - prefix_len) / 2).min(vocab);
        let mut tokens: [Token; N_CTX] = [0; N_CTX];
        let len = prefix_len + 2 * segment_len;
        fill_repeated(
            &mut rng,
            &mut tokens[..len],
            vocab as u32,
            prefix_len,
            segment_len,
            Draw::Distinct,
        );
        Prompt {
            tokens,
            prefix_len,
            segment_len,
        }
    }

    /// The tokens.
    pub fn tokens(&self) -> &[Token] {
        &self.tokens[..self.prefix_len + 2 * self.segment_len]
    }

    /// Length of the random prefix.
    pub fn prefix_len(&self) -> usize {
        self.prefix_len
    }

    /// Length of the repeated segment.
    pub fn segment_len(&self) -> usize {
        self.segment_len
    }

    /// Whether `pos` is in the second copy of the segment.
    pub fn in_repeat(&self, pos: usize) -> bool {
        let start = self.prefix_len + self.segment_len;
        (start..start + self.segment_len).contains(&pos)
    }

    /// The token that the logits at `pos` should predict, if it is predictable by induction: the next
    /// token, when both are in the second copy.
    pub fn repeated_target(&self, pos: usize) -> Option<u32> {
        (self.in_repeat(pos) && self.in_repeat(pos + 1)).then(|| u32::from(self.tokens[pos + 1]))
    }
}
