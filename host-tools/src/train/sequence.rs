//! One training or evaluation sequence of the induction task: its tokens and where the repeats are.

use microlens::analysis::sequences::Repeat;

/// One training or evaluation sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sequence {
    /// The `n_ctx` tokens.
    pub tokens: Vec<u32>,
    /// Length `p` of the random prefix before the first copy of the segment.
    pub prefix_len: usize,
    /// Length `L` of the repeated segment (the distance back to copy from).
    pub segment_len: usize,
}

impl Sequence {
    /// `tokens` laid out as `repeat` says.
    pub fn new(tokens: Vec<u32>, repeat: Repeat) -> Self {
        Sequence {
            tokens,
            prefix_len: repeat.prefix_len,
            segment_len: repeat.segment_len,
        }
    }

    /// First position whose *next* token is predictable by induction: `p + L` (the current token was seen
    /// before, at `i - L`, and `tokens[i + 1] = tokens[i + 1 - L]`).
    pub fn first_predictable(&self) -> usize {
        self.prefix_len + self.segment_len
    }

    /// Whether the prediction made at position `i` (of token `i + 1`) lies in the repeated part.
    pub fn is_predictable(&self, i: usize) -> bool {
        i >= self.first_predictable() && i + 1 < self.tokens.len()
    }
}
