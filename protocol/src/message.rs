//! The messages: what the host asks ([`Request`]) and what the device answers ([`Response`]).

use heapless::{String, Vec};
use serde::{Deserialize, Serialize};

use crate::{BLOB_CHUNK, CHUNK, MAX_NAME, MAX_STEP_TOKENS, MAX_TOP_K};

/// What the host asks. Each request is answered by one or more [`Response`] frames, the last of which
/// ends it: [`Response::Done`], [`Response::Info`], [`Response::Hash`], [`Response::Blob`] or
/// [`Response::Error`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// What the device runs: [`Response::Info`].
    Info,
    /// Empties the KV cache and the logits hash: the next token is position 0. [`Response::Done`].
    Reset,
    /// Consumes `tokens` at the next positions, with the ablated heads zeroed; answers each position's
    /// `output` ([`Response::Values`] chunks of the logits, or [`Response::TopK`]), then
    /// [`Response::Done`]. A bad token stops the request there with an error; the tokens before it stay
    /// consumed.
    Step {
        /// Token ids, each below `d_vocab`.
        tokens: Vec<u32, MAX_STEP_TOKENS>,
        /// What to answer for each position.
        output: Output,
    },
    /// One hook point, by TransformerLens name (`blocks.1.attn.hook_pattern`) and head (0 for points
    /// that are not per head), at positions `start..end` of the tokens consumed so far: the device runs
    /// those tokens again from position 0 (with the same ablations) and answers [`Response::Values`]
    /// chunks of each position's activation, then [`Response::Done`].
    Read {
        /// TransformerLens hook name.
        name: String<MAX_NAME>,
        /// Head of a per-head point, else 0.
        head: u16,
        /// First position.
        start: u32,
        /// One past the last position (at most the tokens consumed).
        end: u32,
        /// Run the output projection head by head, as TransformerLens's `use_attn_result` (and the
        /// host's activation cache, which records `hook_result`): `hook_attn_out` and what follows
        /// it then round as they do there. Reading `hook_result` itself implies it.
        attn_result: bool,
    },
    /// Zero-ablates a head (its `hook_z`) from now on; empties the KV cache, as [`Request::Reset`].
    Ablate {
        /// Block.
        layer: u16,
        /// Head.
        head: u16,
    },
    /// Ends every ablation; empties the KV cache, as [`Request::Reset`].
    Restore,
    /// The FNV-1a 64 hash of every logit since the last reset: [`Response::Hash`].
    Hash,
    /// [`crate::BLOB_CHUNK`] bytes of the model blob from `offset`: [`Response::Blob`].
    Blob {
        /// Byte offset into the blob.
        offset: u32,
    },
}

/// What a [`Request::Step`] answers for each position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Output {
    /// Nothing (the logits still enter the hash).
    Nothing,
    /// All logits, in [`Response::Values`] chunks.
    Logits,
    /// The `k` (at most [`MAX_TOP_K`]) largest logits, largest first, lower token first on ties.
    TopK(u8),
}

/// What the device answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// Answer to [`Request::Info`].
    Info(Info),
    /// Values `offset..offset + values.len()` of one position's logits or activation, whose whole
    /// length is `width`.
    Values {
        /// Position.
        pos: u32,
        /// Index of the first value.
        offset: u32,
        /// Length of the whole vector.
        width: u32,
        /// At most [`CHUNK`] values, bit for bit.
        values: Vec<f32, CHUNK>,
    },
    /// The top logits of one position: `(token, logit)`, largest first.
    TopK {
        /// Position.
        pos: u32,
        /// The entries.
        entries: Vec<(u32, f32), MAX_TOP_K>,
    },
    /// Answer to [`Request::Hash`].
    Hash {
        /// Positions hashed (tokens consumed since the last reset).
        positions: u32,
        /// FNV-1a 64 of every logit's little-endian bytes, position by position.
        hash: u64,
    },
    /// Answer to [`Request::Blob`].
    Blob {
        /// Byte offset of `bytes`.
        offset: u32,
        /// The blob's length.
        total: u32,
        /// Up to [`BLOB_CHUNK`] bytes (fewer at the end).
        bytes: Vec<u8, BLOB_CHUNK>,
    },
    /// End of a request's answer.
    Done,
    /// The request failed; the device keeps serving.
    Error(ErrorKind),
}

/// What went wrong with a request or a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The frame's CRC-32 does not match.
    Crc,
    /// Not valid COBS.
    Framing,
    /// Longer than [`crate::MAX_FRAME`].
    Oversized,
    /// Too short to hold a version and a CRC.
    Truncated,
    /// Another protocol version (the frame's).
    Version(u8),
    /// The payload is not a request (bad postcard, unknown variant, too many items, trailing bytes).
    Malformed,
    /// A token at or above `d_vocab`.
    TokenOutOfRange(u32),
    /// The KV cache is full (the device's context).
    ContextFull,
    /// Not a TransformerLens hook name.
    UnknownHook,
    /// A hook point this model has not or this build compiled out.
    HookUnavailable,
    /// A layer at or above `n_layers`.
    LayerOutOfRange,
    /// A head at or above `n_heads`, or a head given for a point that is not per head.
    HeadOutOfRange,
    /// Positions outside the tokens consumed, or an empty range.
    PositionsOutOfRange,
    /// A top-k of 0 or above [`MAX_TOP_K`].
    TopKOutOfRange,
    /// A blob offset past its end.
    BlobOutOfRange,
    /// The forward pass failed otherwise.
    Model,
}

/// What the device runs: its model's shape, capabilities and build.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Info {
    /// [`crate::VERSION`].
    pub protocol: u8,
    /// The firmware's version.
    pub firmware: String<16>,
    /// The board (its firmware feature).
    pub board: String<16>,
    /// Blocks.
    pub n_layers: u32,
    /// Heads per block.
    pub n_heads: u32,
    /// Residual width.
    pub d_model: u32,
    /// Head width.
    pub d_head: u32,
    /// Input vocabulary.
    pub d_vocab: u32,
    /// Output vocabulary.
    pub d_vocab_out: u32,
    /// The model's context.
    pub n_ctx: u32,
    /// Positions the device's KV cache holds (at most `n_ctx`).
    pub context: u32,
    /// The blob's capabilities (`weights-i8,activations-i8,...`).
    pub features: String<192>,
    /// Hook points the build calls: bit `k` for `HookKind::ALL[k]`.
    pub hooks: u32,
    /// [`crate::MAX_FRAME`] of the device.
    pub max_frame: u32,
    /// Bytes of the blob.
    pub blob_len: u32,
    /// FNV-1a 64 of the blob.
    pub blob_hash: u64,
}
