//! Training data for induction: a random prefix, then a random segment repeated until the context is full.
//!
//! Layout of one sequence of length `n_ctx`: `prefix (p tokens) | s | s | s ...` (the last copy cut off),
//! with the segment length `L` and the prefix length `p` both random, so no fixed distance back is always
//! right and only induction (find the earlier occurrence of the current token, copy what followed it)
//! predicts the repeats. Tokens are drawn either distinct inside a segment ([`Draw::Distinct`]: every
//! prediction in the repeats has exactly one earlier occurrence to copy from) or with replacement
//! ([`Draw::Replacement`], as TransformerLens's `generate_repeated_tokens`: a token may occur several times
//! in the segment and in the prefix, so the model must tell the occurrences apart, e.g. by the token before).

use microlens::analysis::sequences::{self, Random, RepeatedTokens};

use super::sequence::Sequence;
use rand::Rng;

use crate::eval::sequences::{vocab, FromRand};

pub use microlens::analysis::sequences::Draw;

/// Shortest segment that gets repeated.
pub const MIN_SEGMENT: usize = 4;

/// The distribution of sequences: context length, vocabulary, the range of segment lengths and the draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InductionData {
    /// Sequence length.
    pub n_ctx: usize,
    /// Tokens are `0..d_vocab`.
    pub d_vocab: usize,
    /// Shortest segment.
    pub min_segment: usize,
    /// Longest segment: at most `n_ctx / 2` (two full copies fit) and, for distinct tokens, `d_vocab`.
    pub max_segment: usize,
    /// How segment tokens are drawn.
    pub draw: Draw,
}

impl InductionData {
    /// The widest distribution of distinct segments for a context and vocabulary: `L` in
    /// `MIN_SEGMENT..=min(n_ctx/2, d_vocab)`.
    pub fn new(n_ctx: usize, d_vocab: usize) -> anyhow::Result<Self> {
        Self::with_draw(n_ctx, d_vocab, Draw::Distinct)
    }

    /// The widest distribution with segments drawn by `draw`: `L` in `MIN_SEGMENT..=n_ctx/2` (and
    /// `<= d_vocab` for distinct tokens).
    pub fn with_draw(n_ctx: usize, d_vocab: usize, draw: Draw) -> anyhow::Result<Self> {
        let max_segment = match draw {
            Draw::Distinct => (n_ctx / 2).min(d_vocab),
            Draw::Replacement => n_ctx / 2,
        };
        anyhow::ensure!(
            max_segment >= MIN_SEGMENT,
            "n_ctx {n_ctx} and d_vocab {d_vocab} are too small: need n_ctx >= {} and d_vocab >= {MIN_SEGMENT}",
            2 * MIN_SEGMENT
        );
        Ok(Self {
            n_ctx,
            d_vocab,
            min_segment: MIN_SEGMENT,
            max_segment,
            draw,
        })
    }

    /// Draws one sequence with the core's generator: `L ~ U[min, max]`, `p ~ U[0, n_ctx - 2L]`, prefix =
    /// `p` uniform tokens, segment = `L` tokens drawn by `self.draw`.
    pub fn sample(&self, rng: &mut impl Rng) -> Sequence {
        let data = RepeatedTokens {
            d_vocab: vocab(self.d_vocab),
            min_segment: self.min_segment,
            max_segment: self.max_segment,
            draw: self.draw,
        };
        let mut tokens = vec![0; self.n_ctx];
        let repeat = data.fill(&mut FromRand(rng), &mut tokens);
        Sequence::new(tokens, repeat)
    }

    /// Draws `n` sequences.
    pub fn sample_many(&self, rng: &mut impl Rng, n: usize) -> Vec<Sequence> {
        (0..n).map(|_| self.sample(rng)).collect()
    }
}

/// What a training run learns from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TrainData {
    /// Random prefix + repeated segment of distinct tokens (the first shipped model's data).
    Distinct,
    /// Random prefix + repeated segment drawn with replacement.
    Replacement,
    /// Bytes (vocabulary 256): random bytes with replacement, and English training text (a prefix, then
    /// a phrase repeated).
    Bytes,
}

impl TrainData {
    /// Checks the data against the model's context and vocabulary.
    pub fn check(self, n_ctx: usize, d_vocab: usize) -> anyhow::Result<()> {
        if self == TrainData::Bytes {
            anyhow::ensure!(d_vocab == 256, "byte data needs --vocab 256, not {d_vocab}");
        }
        self.distribution(n_ctx, d_vocab).map(|_| ())
    }

    fn distribution(self, n_ctx: usize, d_vocab: usize) -> anyhow::Result<InductionData> {
        match self {
            TrainData::Distinct => InductionData::new(n_ctx, d_vocab),
            TrainData::Replacement | TrainData::Bytes => {
                InductionData::with_draw(n_ctx, d_vocab, Draw::Replacement)
            }
        }
    }

    /// Draws `n` training sequences of `n_ctx` tokens. Distinct: all from [`InductionData::new`].
    /// Replacement, in a cycle of 8: 7 random prefix + repeated segment, 1 TransformerLens-style
    /// `2 x n_ctx/2` (otherwise the longest segment, the standard test, is 1 sequence in 29; more of them
    /// and the model settles on copying from a fixed distance). Bytes: the same, with 2 of the 8
    /// English training text (a prefix, then a phrase repeated) instead of random bytes.
    pub fn sample_many(
        self,
        rng: &mut impl Rng,
        n_ctx: usize,
        d_vocab: usize,
        n: usize,
    ) -> anyhow::Result<Vec<Sequence>> {
        let data = self.distribution(n_ctx, d_vocab)?;
        let half = n_ctx / 2;
        Ok((0..n)
            .map(|k| match (self, k % 8) {
                (TrainData::Distinct, _) => data.sample(rng),
                (_, 7) => repeated_twice(rng, half, d_vocab, Draw::Replacement),
                (TrainData::Replacement, 3) => {
                    repeated_from_start(rng, n_ctx, d_vocab, Draw::Distinct)
                }
                (TrainData::Bytes, 1 | 5) => super::phrases::repeated_training_phrase(rng, n_ctx),
                _ => data.sample(rng),
            })
            .collect())
    }
}

/// A segment of `L ~ U[MIN_SEGMENT, n_ctx / 2]` tokens drawn by `draw` from the first position on (no
/// prefix), repeated to fill `n_ctx` tokens: the repeat of the first token, which has no token before it,
/// at varying distances.
pub fn repeated_from_start(
    rng: &mut impl Rng,
    n_ctx: usize,
    d_vocab: usize,
    draw: Draw,
) -> Sequence {
    let mut rng = FromRand(rng);
    let segment_len = rng.between(MIN_SEGMENT, n_ctx / 2);
    let mut tokens = vec![0; n_ctx];
    let repeat =
        sequences::fill_repeated(&mut rng, &mut tokens, vocab(d_vocab), 0, segment_len, draw);
    Sequence::new(tokens, repeat)
}

/// TransformerLens's `generate_repeated_tokens` (without the BOS token), with the core's generator:
/// `half` random tokens drawn by `draw`, then the same tokens again (`2 * half` tokens).
pub fn repeated_twice(rng: &mut impl Rng, half: usize, d_vocab: usize, draw: Draw) -> Sequence {
    let mut tokens = vec![0; 2 * half];
    let repeat = sequences::repeated_twice(&mut FromRand(rng), &mut tokens, vocab(d_vocab), draw);
    Sequence::new(tokens, repeat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn sequences_repeat_their_segment_after_the_prefix() {
        let data = InductionData::new(64, 64).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut offsets = std::collections::BTreeSet::new();
        let mut lens = std::collections::BTreeSet::new();
        for s in data.sample_many(&mut rng, 500) {
            assert_eq!(s.tokens.len(), 64);
            assert!(s.prefix_len + 2 * s.segment_len <= 64);
            for i in s.prefix_len + s.segment_len..64 {
                assert_eq!(s.tokens[i], s.tokens[i - s.segment_len]);
            }
            let seg = &s.tokens[s.prefix_len..s.prefix_len + s.segment_len];
            let distinct: std::collections::BTreeSet<_> = seg.iter().collect();
            assert_eq!(distinct.len(), s.segment_len);
            offsets.insert(s.prefix_len);
            lens.insert(s.segment_len);
        }
        assert!(
            offsets.len() > 20 && lens.len() > 20,
            "offsets and segment lengths must vary"
        );
    }

    #[test]
    fn replacement_segments_repeat_tokens_and_are_copied_exactly() {
        let data = InductionData::with_draw(64, 64, Draw::Replacement).unwrap();
        assert_eq!(data.max_segment, 32);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let seqs = data.sample_many(&mut rng, 300);
        let mut with_duplicates = 0;
        for s in &seqs {
            assert_eq!(s.tokens.len(), 64);
            for i in s.first_predictable()..64 {
                assert_eq!(s.tokens[i], s.tokens[i - s.segment_len]);
            }
            let seg = &s.tokens[s.prefix_len..s.prefix_len + s.segment_len];
            let distinct: std::collections::BTreeSet<_> = seg.iter().collect();
            with_duplicates += usize::from(distinct.len() < seg.len());
        }
        assert!(
            with_duplicates > 100,
            "{with_duplicates} of 300 segments repeat a token"
        );
        let twice = repeated_twice(&mut rng, 32, 64, Draw::Replacement);
        assert_eq!(twice.tokens[..32], twice.tokens[32..]);
        assert_eq!((twice.prefix_len, twice.segment_len), (0, 32));
        assert_eq!((0..64).filter(|&i| twice.is_predictable(i)).count(), 31);
    }
}
