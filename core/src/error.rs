//! The one error type: every bad blob, bad buffer or bad call is a value of [`Error`], never a panic.

use core::fmt;

/// What was inconsistent in a blob or a config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Inconsistency {
    /// The config itself is invalid (the text says how).
    Config(&'static str),
    /// The header has not the expected number of tensor entries.
    TensorCount {
        /// Entries the config requires.
        expected: usize,
        /// Entries the header lists.
        found: usize,
    },
    /// Tensor entry `index` is not the tensor the config expects at that place.
    TensorOrder {
        /// Index in the tensor table.
        index: usize,
    },
    /// Tensor entry `index` has a shape other than the config requires.
    Shape {
        /// Index in the tensor table.
        index: usize,
    },
    /// Tensor entry `index` has a byte length that does not match its shape and dtype.
    Length {
        /// Index in the tensor table.
        index: usize,
    },
    /// Tensor entry `index` points outside the data section.
    Bounds {
        /// Index in the tensor table.
        index: usize,
    },
    /// Tensor entry `index` has a dtype not allowed for that tensor, or an unknown one.
    DType {
        /// Index in the tensor table.
        index: usize,
    },
    /// Tensor entry `index` has a quantisation scale that is not finite and positive.
    Scale {
        /// Index in the tensor table.
        index: usize,
    },
    /// The preamble's lengths do not fit each other.
    Layout,
    /// A tensor the config needs cannot be found.
    MissingTensor,
}

/// Everything that can go wrong, from reading a blob to running a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// The blob does not start with [`crate::blob::MAGIC`].
    BadMagic,
    /// The blob's format version is not one this crate reads.
    UnsupportedVersion {
        /// Version found in the preamble.
        found: u16,
    },
    /// The blob has flags this crate does not know.
    UnsupportedFlags {
        /// Flags found in the preamble.
        found: u16,
    },
    /// The blob is shorter than its preamble says.
    Truncated {
        /// Bytes the preamble announces.
        expected: usize,
        /// Bytes present.
        found: usize,
    },
    /// The CRC32 of the blob body does not match the preamble.
    BadCrc {
        /// CRC in the preamble.
        expected: u32,
        /// CRC of the bytes present.
        found: u32,
    },
    /// The postcard header could not be decoded.
    BadHeader,
    /// The blob or config contradicts itself.
    Inconsistent(Inconsistency),
    /// A caller-provided buffer is too small.
    BufferTooSmall {
        /// Which buffer.
        what: &'static str,
        /// `f32` words needed.
        needed: usize,
        /// `f32` words provided.
        found: usize,
    },
    /// A token id is not below `d_vocab`.
    TokenOutOfRange {
        /// The token.
        token: u32,
        /// The vocabulary size.
        d_vocab: usize,
    },
    /// The KV cache already holds `n_ctx` positions.
    ContextFull {
        /// The context length (the model's, or the session's cap).
        n_ctx: usize,
    },
    /// A caller-provided index (layer, head, position) is out of range.
    OutOfRange {
        /// Which index.
        what: &'static str,
    },
    /// The blob needs a capability this build of the crate was compiled without.
    Unsupported {
        /// The crate feature that provides it (e.g. `weights-f16`, `rotary`).
        feature: &'static str,
    },
}

impl fmt::Display for Inconsistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Inconsistency::Config(what) => write!(f, "invalid config: {what}"),
            Inconsistency::TensorCount { expected, found } => {
                write!(
                    f,
                    "header lists {found} tensors, the config needs {expected}"
                )
            }
            Inconsistency::TensorOrder { index } => {
                write!(f, "tensor entry {index} is not the expected tensor")
            }
            Inconsistency::Shape { index } => write!(f, "tensor entry {index} has the wrong shape"),
            Inconsistency::Length { index } => {
                write!(f, "tensor entry {index} has the wrong byte length")
            }
            Inconsistency::Bounds { index } => {
                write!(f, "tensor entry {index} points outside the data")
            }
            Inconsistency::DType { index } => {
                write!(f, "tensor entry {index} has an unsupported dtype")
            }
            Inconsistency::Scale { index } => write!(
                f,
                "tensor entry {index} has a scale that is not finite and positive"
            ),
            Inconsistency::Layout => write!(f, "preamble lengths are inconsistent"),
            Inconsistency::MissingTensor => write!(f, "a tensor the config needs is missing"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadMagic => write!(f, "not a microlens blob (bad magic)"),
            Error::UnsupportedVersion { found } => {
                write!(
                    f,
                    "unsupported blob format version {found}: convert the checkpoint again with \
                     this build's `microlens convert`"
                )
            }
            Error::UnsupportedFlags { found } => write!(f, "unsupported blob flags {found:#06x}"),
            Error::Truncated { expected, found } => {
                write!(f, "blob truncated: {found} bytes, {expected} expected")
            }
            Error::BadCrc { expected, found } => {
                write!(
                    f,
                    "blob corrupt: CRC32 {found:#010x}, expected {expected:#010x}"
                )
            }
            Error::BadHeader => write!(f, "blob header cannot be decoded"),
            Error::Inconsistent(why) => write!(f, "blob inconsistent: {why}"),
            Error::BufferTooSmall {
                what,
                needed,
                found,
            } => {
                write!(f, "{what} too small: {found} f32 words, {needed} needed")
            }
            Error::TokenOutOfRange { token, d_vocab } => {
                write!(f, "token {token} out of range (d_vocab = {d_vocab})")
            }
            Error::ContextFull { n_ctx } => {
                write!(
                    f,
                    "context full: the session holds at most {n_ctx} positions"
                )
            }
            Error::OutOfRange { what } => write!(f, "{what} out of range"),
            Error::Unsupported { feature } => write!(
                f,
                "the blob needs the microlens feature `{feature}`, which this build leaves out"
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}
