//! Mutations of an input, as a fuzzer's first rounds make them: bits flipped, bytes and words set to
//! boundary values, ranges inserted, deleted, repeated or cut off. Deterministic for a seed, so a failure
//! replays.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Boundary words written over an input (little-endian): zero, one, the signed and unsigned extremes.
const WORDS: [u32; 7] = [0, 1, 0x7f, 0x80, 0x7fff_ffff, 0x8000_0000, u32::MAX];

/// A source of mutants of inputs, seeded.
pub struct Mutator {
    rng: ChaCha8Rng,
}

impl Mutator {
    /// A mutator whose mutants depend only on `seed` and the inputs given.
    pub fn new(seed: u64) -> Self {
        Mutator {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// `input` with one to four mutations applied; at most `max_len` bytes.
    pub fn mutant(&mut self, input: &[u8], max_len: usize) -> Vec<u8> {
        let mut out = input.to_vec();
        for _ in 0..self.rng.random_range(1..=4) {
            self.mutate(&mut out);
        }
        out.truncate(max_len);
        out
    }

    /// `len` random bytes.
    pub fn random(&mut self, len: usize) -> Vec<u8> {
        let mut out = vec![0; len];
        self.rng.fill_bytes(&mut out);
        out
    }

    /// One mutation of `b`.
    fn mutate(&mut self, b: &mut Vec<u8>) {
        if b.is_empty() {
            let len = self.rng.random_range(1..64);
            *b = self.random(len);
            return;
        }
        let i = self.rng.random_range(0..b.len());
        let span = self.rng.random_range(1..=(b.len() - i).min(64));
        match self.rng.random_range(0..7) {
            0 => b[i] ^= 1 << self.rng.random_range(0..8),
            1 => b[i] = [0, 1, 0x7f, 0x80, 0xff][self.rng.random_range(0..5)],
            2 => {
                let w = WORDS[self.rng.random_range(0..WORDS.len())].to_le_bytes();
                let end = (i + 4).min(b.len());
                b[i..end].copy_from_slice(&w[..end - i]);
            }
            3 => {
                let bytes = self.random(span);
                b.splice(i..i, bytes);
            }
            4 => {
                b.drain(i..i + span);
            }
            5 => {
                let copy = b[i..i + span].to_vec();
                b.splice(i..i, copy);
            }
            _ => b.truncate(i),
        }
    }
}
