//! Generated token sequences: the repeated random tokens that exercise induction. Two generators, drawn
//! differently on purpose (their seeds pin figures and hashes in the tests): [`induction_sequences`] (a
//! random prefix, then a random segment repeated at varying periods; `fidelity` and calibration) and
//! [`repeated_random_tokens`] (`half` tokens then the same again, TransformerLens's detector data; the
//! head detectors and composition baselines).

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `n` sequences of `seq_len` tokens below `d_vocab`: a random prefix of random length (up to half the
/// sequence), then a random segment (of at least 2 tokens where there is room) repeated until the
/// sequence is full, so copying is exercised at varying offsets and periods.
pub fn induction_sequences(n: usize, seq_len: usize, d_vocab: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let token = move |rng: &mut ChaCha8Rng| rng.random_range(0..d_vocab.max(1) as u32);
    (0..n)
        .map(|_| {
            let prefix_len = rng.random_range(0..=seq_len / 2);
            let rest = seq_len - prefix_len;
            let longest = (rest / 2).max(1);
            let segment_len = rng.random_range(2.min(longest)..=longest);
            let prefix: Vec<u32> = (0..prefix_len).map(|_| token(&mut rng)).collect();
            let segment: Vec<u32> = (0..segment_len).map(|_| token(&mut rng)).collect();
            prefix
                .into_iter()
                .chain(segment.iter().copied().cycle().take(rest))
                .collect()
        })
        .collect()
}

/// `n_seqs` sequences of `half` random tokens below `d_vocab` followed by the same tokens again
/// (`2 * half` long). The tokens of one half are distinct when `half <= d_vocab` (so duplicates and
/// induction targets come only from the repeat), drawn with replacement otherwise.
pub fn repeated_random_tokens(
    d_vocab: usize,
    half: usize,
    n_seqs: usize,
    seed: u64,
) -> Vec<Vec<u32>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n_seqs)
        .map(|_| {
            let first: Vec<u32> = if half <= d_vocab {
                let mut all: Vec<u32> = (0..d_vocab as u32).collect();
                all.shuffle(&mut rng);
                all.truncate(half);
                all
            } else {
                (0..half)
                    .map(|_| rng.random_range(0..d_vocab as u32))
                    .collect()
            };
            first.iter().chain(&first).copied().collect()
        })
        .collect()
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
            // at least 24 - 1 - 12 (prefix) - 6 (segment) positions long.
            let rep = repeated_positions(s);
            assert!(rep.len() >= 5, "{s:?}");
            assert_eq!(rep, (rep[0]..23).collect::<Vec<_>>(), "{s:?}");
        }
        let tiny = induction_sequences(5, 3, 4, 0);
        assert!(tiny.iter().all(|s| s.len() == 3));
    }

    #[test]
    fn repeated_positions_are_earlier_bigrams() {
        assert_eq!(repeated_positions(&[1, 2, 3, 1, 2, 3, 1]), vec![3, 4, 5]);
        assert_eq!(repeated_positions(&[5]), Vec::<usize>::new());
    }
}
