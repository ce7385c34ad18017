//! Repeated random tokens as `Vec`s, from the core's one generator ([`microlens::analysis::sequences`]):
//! [`induction_sequences`] (a random prefix, then a random segment repeated at varying periods, with
//! replacement; `fidelity` and calibration) and [`repeated_random_tokens`] (`half` tokens then the same
//! again, TransformerLens's detector data; the head detectors and composition baselines).

use microlens::analysis::sequences::{repeated_twice, Draw, Random, RepeatedTokens, SplitMix64};

/// A `rand` generator as the core's [`Random`] (training draws its data from seeded ChaCha8 streams).
pub struct FromRand<'a, R: ?Sized>(pub &'a mut R);

impl<R: rand::RngCore + ?Sized> Random for FromRand<'_, R> {
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
}

/// `n` sequences of `seq_len` tokens below `d_vocab` from `seed`: a segment of `L ~ U[2, seq_len / 2]`
/// tokens drawn with replacement, after a random prefix of `p ~ U[0, seq_len - 2L]` tokens, repeated
/// until the sequence is full, so copying is exercised at varying offsets and periods.
pub fn induction_sequences(n: usize, seq_len: usize, d_vocab: usize, seed: u64) -> Vec<Vec<u32>> {
    let data = RepeatedTokens {
        d_vocab: vocab(d_vocab),
        min_segment: 2,
        max_segment: seq_len / 2,
        draw: Draw::Replacement,
    };
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            let mut tokens = vec![0; seq_len];
            data.fill(&mut rng, &mut tokens);
            tokens
        })
        .collect()
}

/// `n_seqs` sequences of `half` random tokens below `d_vocab` followed by the same tokens again
/// (`2 * half` long), from `seed`. The tokens of one half are distinct when `half <= d_vocab` (so
/// duplicates and induction targets come only from the repeat), drawn with replacement otherwise.
pub fn repeated_random_tokens(
    d_vocab: usize,
    half: usize,
    n_seqs: usize,
    seed: u64,
) -> Vec<Vec<u32>> {
    let draw = if half <= d_vocab {
        Draw::Distinct
    } else {
        Draw::Replacement
    };
    let mut rng = SplitMix64::new(seed);
    (0..n_seqs)
        .map(|_| {
            let mut tokens = vec![0; 2 * half];
            repeated_twice(&mut rng, &mut tokens, vocab(d_vocab), draw);
            tokens
        })
        .collect()
}

/// A vocabulary size as the core's `u32` (sizes beyond it are cut).
pub fn vocab(d_vocab: usize) -> u32 {
    u32::try_from(d_vocab).unwrap_or(u32::MAX)
}

/// Positions `t` whose next token an induction head could predict: the bigram `(tokens[t], tokens[t+1])`
/// occurred earlier in the sequence. On the generated data these are the repeats of the segment.
pub fn repeated_positions(tokens: &[u32]) -> Vec<usize> {
    (0..tokens.len().saturating_sub(1))
        .filter(|&t| (0..t).any(|j| tokens[j] == tokens[t] && tokens[j + 1] == tokens[t + 1]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_have_a_prefix_then_a_repeated_segment() {
        let seqs = induction_sequences(50, 24, 1000, 3);
        assert_eq!(seqs, induction_sequences(50, 24, 1000, 3), "seeded");
        for s in &seqs {
            assert_eq!(s.len(), 24);
            assert!(s.iter().all(|&t| t < 1000));
            // With 1000 tokens, accidental repeats are rare: the repeated part is a tail of the sequence,
            // from the second copy's first token (at most 24 - L) to the last prediction (22).
            let rep = repeated_positions(s);
            assert!(!rep.is_empty(), "{s:?}");
            assert_eq!(rep, (rep[0]..23).collect::<Vec<_>>(), "{s:?}");
        }
        let tiny = induction_sequences(5, 3, 4, 0);
        assert!(tiny.iter().all(|s| s.len() == 3));
    }

    #[test]
    fn repeated_random_tokens_repeat_their_first_half() {
        for (vocab, distinct) in [(64, true), (20, false)] {
            for s in repeated_random_tokens(vocab, 32, 20, 1) {
                assert_eq!(s[..32], s[32..]);
                let set: std::collections::BTreeSet<_> = s[..32].iter().collect();
                assert_eq!(set.len() == 32, distinct, "{s:?}");
            }
        }
    }

    #[test]
    fn repeated_positions_are_earlier_bigrams() {
        assert_eq!(repeated_positions(&[1, 2, 3, 1, 2, 3, 1]), vec![3, 4, 5]);
        assert_eq!(repeated_positions(&[5]), Vec::<usize>::new());
    }
}
