//! The wire protocol of a microlens firmware in serve mode, shared by the firmware and the host
//! (`microlens device`): `no_std`, no heap, every buffer fixed at compile time.
//!
//! A frame on the wire is `COBS(VERSION ‖ postcard(message) ‖ CRC-32(VERSION ‖ postcard(message))) ‖ 0x00`
//! ([`frame`]), at most [`MAX_FRAME`] bytes before its `0x00` delimiter. The host sends a [`Request`]; the
//! device answers with one or more [`Response`] frames, the last of which is [`Response::Done`], an
//! answer of its own (`Info`, `Hash`, `Blob`) or an [`Response::Error`]. docs/wire-protocol.md specifies
//! the format.

#![no_std]
#![forbid(unsafe_code)]

pub mod frame;
pub mod hook_name;
pub mod message;

pub use frame::{decode, encode, FrameError, FrameReader, FrameWriter};
pub use message::{ErrorKind, Info, Output, Request, Response};

/// Protocol version: the first byte of every frame's payload. A frame of another version is answered
/// with [`ErrorKind::Version`].
pub const VERSION: u8 = 1;

/// Longest frame on the wire, COBS-encoded, without its `0x00` delimiter; both sides refuse longer ones.
pub const MAX_FRAME: usize = 512;

/// Longest payload (`VERSION ‖ message ‖ CRC`) that COBS-encodes within [`MAX_FRAME`] (COBS adds one
/// byte per 254 and one more).
pub const MAX_PAYLOAD: usize = MAX_FRAME - MAX_FRAME.div_ceil(254) - 1;

/// `f32` values in one [`Response::Values`] frame: what fits in [`MAX_PAYLOAD`] beside its header.
pub const CHUNK: usize = 120;

/// Tokens in one [`Request::Step`].
pub const MAX_STEP_TOKENS: usize = 64;

/// Longest top-k list of a [`Request::Step`] with [`Output::TopK`].
pub const MAX_TOP_K: usize = 16;

/// Longest TransformerLens hook name of a [`Request::Read`] (`blocks.L.attn.hook_attn_scores`).
pub const MAX_NAME: usize = 48;

/// Bytes of the blob in one [`Response::Blob`] frame.
pub const BLOB_CHUNK: usize = 448;
