//! Repeated random tokens, the input that exercises induction: a random prefix, then a random segment
//! repeated until the buffer is full, its tokens drawn with replacement (TransformerLens's
//! `generate_repeated_tokens`) or distinct. One generator for the device's prompt and every host tool.
//!
//! Everything fills a caller's buffer: no heap, and no panic whatever the sizes (a vocabulary of 0 gives
//! zeros, lengths are clamped to the buffer).
//!
//! ```
//! use microlens::analysis::sequences::{repeated_twice, Draw, SplitMix64};
//! let mut tokens = [0u32; 64];
//! let repeat = repeated_twice(&mut SplitMix64::new(7), &mut tokens, 64, Draw::Replacement);
//! assert_eq!(tokens[..32], tokens[32..]);
//! assert_eq!(repeat.first_predictable(), 32);
//! ```

/// A source of uniform 64-bit words; [`SplitMix64`] is the one every target shares.
pub trait Random {
    /// The next uniform word.
    fn next_u64(&mut self) -> u64;

    /// Uniform in `0..n` (`0` for `n = 0`): `(high 32 bits * n) >> 32`, no division (bias < `n / 2^32`).
    fn below(&mut self, n: u32) -> u32 {
        (((self.next_u64() >> 32) * u64::from(n)) >> 32) as u32
    }

    /// Uniform in `lo..=hi` (`lo` when `hi <= lo`; spans beyond `u32::MAX` are cut to it).
    fn between(&mut self, lo: usize, hi: usize) -> usize {
        let span = hi.saturating_sub(lo).saturating_add(1);
        lo + self.below(u32::try_from(span).unwrap_or(u32::MAX)) as usize
    }
}

/// SplitMix64 (Steele, Lea and Flood 2014): a 64-bit counter through a mixing function; the same words
/// on every target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The generator for `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
}

impl Random for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A token id stored as `u8`, `u16` or `u32` (a device stores its prompt in the narrowest that fits).
pub trait Token: Copy {
    /// Tokens are below this (the vocabulary is cut to it).
    const LIMIT: u32;
    /// The token `t` (`t < LIMIT`).
    fn from_u32(t: u32) -> Self;
    /// Its id.
    fn to_u32(self) -> u32;
}

macro_rules! token {
    ($t:ty, $limit:expr) => {
        impl Token for $t {
            const LIMIT: u32 = $limit;
            fn from_u32(t: u32) -> Self {
                t as $t
            }
            fn to_u32(self) -> u32 {
                u32::from(self)
            }
        }
    };
}
token!(u8, 1 << 8);
token!(u16, 1 << 16);
token!(u32, u32::MAX);

/// How the tokens of the segment are drawn (the prefix is always drawn with replacement).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Draw {
    /// Uniform with replacement, as TransformerLens's `generate_repeated_tokens`: a token may occur
    /// several times in the segment and in the prefix.
    Replacement,
    /// Distinct tokens in the segment (at most the vocabulary), so each has one earlier occurrence.
    Distinct,
}

/// Where the parts of a generated sequence are: `prefix (p) | segment (L) | segment | ...`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repeat {
    /// Length `p` of the random prefix.
    pub prefix_len: usize,
    /// Length `L` of the repeated segment (the distance back to copy from).
    pub segment_len: usize,
}

impl Repeat {
    /// First position whose next token is predictable by induction: `p + L` (the first token of the
    /// second copy; `tokens[i + 1] = tokens[i + 1 - L]` from there on).
    pub fn first_predictable(&self) -> usize {
        self.prefix_len + self.segment_len
    }
}

/// Fills `out`: `prefix_len` tokens below `d_vocab` with replacement, then `segment_len` tokens drawn by
/// `draw`, then the segment again and again until `out` is full (the last copy cut off). The prefix is
/// cut to `out`, the segment to what is left (at least 1 token where there is room) and, distinct, to
/// the vocabulary.
pub fn fill_repeated<T: Token>(
    rng: &mut impl Random,
    out: &mut [T],
    d_vocab: u32,
    prefix_len: usize,
    segment_len: usize,
    draw: Draw,
) -> Repeat {
    let vocab = d_vocab.min(T::LIMIT);
    let p = prefix_len.min(out.len());
    let mut l = segment_len.max(1).min(out.len() - p);
    if draw == Draw::Distinct {
        l = l.min(vocab as usize);
    }
    if vocab == 0 {
        out.iter_mut().for_each(|t| *t = T::from_u32(0));
        return Repeat {
            prefix_len: p,
            segment_len: l,
        };
    }
    for i in 0..p + l {
        let t = match draw {
            Draw::Distinct if i >= p => {
                let r = rng.below(vocab - (i - p) as u32);
                nth_unused(&out[p..i], r)
            }
            _ => rng.below(vocab),
        };
        out[i] = T::from_u32(t);
    }
    if l > 0 {
        for i in p + l..out.len() {
            out[i] = out[i - l];
        }
    }
    Repeat {
        prefix_len: p,
        segment_len: l,
    }
}

/// The `r`-th (0-based) token id not in `used` (distinct ids): the least fixed point of
/// `t = r + #{u in used : u <= t}`, reached from `t = r` in at most `used.len() + 1` rounds.
fn nth_unused<T: Token>(used: &[T], r: u32) -> u32 {
    let mut t = r;
    loop {
        let below = used.iter().filter(|u| u.to_u32() <= t).count() as u32;
        let next = r.saturating_add(below);
        if next == t {
            return t;
        }
        t = next;
    }
}

/// TransformerLens's `generate_repeated_tokens` (without its BOS token): `out.len() / 2` tokens drawn
/// by `draw`, then the same tokens again.
pub fn repeated_twice<T: Token>(
    rng: &mut impl Random,
    out: &mut [T],
    d_vocab: u32,
    draw: Draw,
) -> Repeat {
    let half = out.len() / 2;
    fill_repeated(rng, out, d_vocab, 0, half, draw)
}

/// A distribution of "random prefix, then a random segment repeated": `L ~ U[min_segment, max_segment]`
/// (cut to half the buffer so that two copies fit), then `p ~ U[0, n - 2L]`, so neither the offset nor
/// the period is fixed and only induction predicts the repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepeatedTokens {
    /// Tokens are below this.
    pub d_vocab: u32,
    /// Shortest segment.
    pub min_segment: usize,
    /// Longest segment.
    pub max_segment: usize,
    /// How the segment is drawn.
    pub draw: Draw,
}

impl RepeatedTokens {
    /// Fills `out` with one sequence of the distribution.
    pub fn fill<T: Token>(&self, rng: &mut impl Random, out: &mut [T]) -> Repeat {
        let n = out.len();
        let mut max = self.max_segment.min(n / 2);
        if self.draw == Draw::Distinct {
            max = max.min(self.d_vocab.min(T::LIMIT) as usize);
        }
        let max = max.max(1);
        let l = rng.between(self.min_segment.clamp(1, max), max);
        let p = rng.between(0, n.saturating_sub(2 * l));
        fill_repeated(rng, out, self.d_vocab, p, l, self.draw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repeats_after_prefix<T: Token>(out: &[T], r: Repeat) -> bool {
        (r.first_predictable()..out.len())
            .all(|i| out[i].to_u32() == out[i - r.segment_len].to_u32())
    }

    #[test]
    fn splitmix64_matches_the_reference_words() {
        // The first outputs for seed 1234567 of the reference C implementation (Vigna's splitmix64.c).
        let mut rng = SplitMix64::new(1_234_567);
        assert_eq!(rng.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(rng.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn below_and_between_stay_in_range_and_cover_it() {
        let mut rng = SplitMix64::new(3);
        let mut seen = [false; 7];
        for _ in 0..500 {
            seen[rng.below(7) as usize] = true;
            let x = rng.between(3, 5);
            assert!((3..=5).contains(&x));
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.between(4, 2), 4);
    }

    #[test]
    fn distinct_segments_are_distinct_and_cover_the_vocabulary() {
        let mut rng = SplitMix64::new(5);
        let mut out = [0u8; 20];
        for _ in 0..200 {
            let r = fill_repeated(&mut rng, &mut out, 10, 3, 10, Draw::Distinct);
            assert_eq!((r.prefix_len, r.segment_len), (3, 10));
            let mut seen = [false; 10];
            out[3..13].iter().for_each(|&t| seen[t as usize] = true);
            assert!(seen.iter().all(|&s| s), "{out:?}");
            assert!(repeats_after_prefix(&out, r));
        }
        // The segment is cut to the vocabulary.
        let r = fill_repeated(&mut rng, &mut out, 4, 0, 8, Draw::Distinct);
        assert_eq!(r.segment_len, 4);
        assert!(repeats_after_prefix(&out, r));
    }

    #[test]
    fn replacement_repeats_tokens_inside_segments() {
        let mut rng = SplitMix64::new(9);
        let mut out = [0u32; 64];
        let mut with_duplicates = 0;
        for _ in 0..100 {
            let r = repeated_twice(&mut rng, &mut out, 64, Draw::Replacement);
            assert_eq!((r.prefix_len, r.segment_len), (0, 32));
            assert_eq!(out[..32], out[32..]);
            with_duplicates += usize::from((1..32).any(|i| out[..i].contains(&out[i])));
        }
        // 32 draws from 64 tokens repeat one with probability 1 - 64!/(32! 64^32) > 0.999.
        assert!(with_duplicates > 95, "{with_duplicates}");
    }

    #[test]
    fn the_distribution_varies_offsets_and_periods() {
        let data = RepeatedTokens {
            d_vocab: 64,
            min_segment: 4,
            max_segment: 32,
            draw: Draw::Replacement,
        };
        let mut rng = SplitMix64::new(11);
        let mut out = [0u16; 64];
        let (mut prefixes, mut segments) = ([false; 64], [false; 33]);
        for _ in 0..1000 {
            let r = data.fill(&mut rng, &mut out);
            assert!((4..=32).contains(&r.segment_len));
            assert!(r.prefix_len + 2 * r.segment_len <= 64);
            assert!(repeats_after_prefix(&out, r) && out.iter().all(|&t| t < 64));
            prefixes[r.prefix_len] = true;
            segments[r.segment_len] = true;
        }
        assert!(prefixes[..=40].iter().all(|&s| s) && segments[4..].iter().all(|&s| s));
    }

    #[test]
    fn degenerate_sizes_never_panic() {
        let mut rng = SplitMix64::new(0);
        for n in 0..5 {
            let mut out = [7u8; 4];
            let out = &mut out[..n];
            for draw in [Draw::Replacement, Draw::Distinct] {
                for vocab in [0, 1, 300] {
                    let r = fill_repeated(&mut rng, out, vocab, 9, 9, draw);
                    assert!(r.prefix_len + r.segment_len <= n);
                    repeated_twice(&mut rng, out, vocab, draw);
                    let data = RepeatedTokens {
                        d_vocab: vocab,
                        min_segment: 9,
                        max_segment: 0,
                        draw,
                    };
                    data.fill(&mut rng, out);
                    assert!(out.iter().all(|&t| u32::from(t) < vocab.max(1)));
                }
            }
        }
    }
}
