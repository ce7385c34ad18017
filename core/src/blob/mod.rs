//! The model blob: a fixed preamble, a postcard header, then 16-byte-aligned little-endian tensor data,
//! read in place (no copy) from any `&[u8]`, typically `include_bytes!` in flash.
//!
//! Layout: `[preamble: 20 B][header: header_len B][zero padding to a multiple of 16][data]`. Offsets in the
//! tensor table are relative to the data section, each a multiple of 16, so a blob placed at a 16-byte
//! aligned address (see [`Aligned`]) has aligned tensors; unaligned blobs still read correctly.

pub(crate) mod dtype;
mod entry;
mod header;
#[cfg(all(feature = "std", feature = "encode"))]
mod nearest;
mod preamble;
pub mod quads;
#[cfg(feature = "std")]
mod writer;

// `scale_bits_pair` is unused where the int8 kernel rescales in its own epilogue (`arch/armv7em/dot4.rs`).
#[allow(unused_imports)]
pub(crate) use dtype::{decode_finite_scale, scale_bits_pair, scales_valid, widen_f16, SCALE_UNIT};
#[cfg(any(feature = "std", feature = "encode", test))]
pub use dtype::{encode_scale, scale_up};
pub use dtype::{Activations, DType, I4_GROUP, I8_GROUP, ROW_SUM_BYTES, SCALE_BYTES};
pub use entry::{TensorEntry, ENTRY_LEN};
pub(crate) use header::Header;
pub use header::{Processing, TokenizerRecord};
pub(crate) use preamble::Preamble;
pub use preamble::{MAGIC, PREAMBLE_LEN, VERSION};
#[cfg(feature = "std")]
pub use writer::{with_arithmetic, with_tokenizer, write, TensorData};

use crate::error::{Error, Inconsistency};

/// Alignment of the data section and of every tensor in it.
pub const ALIGN: usize = 16;

/// CRC-32/ISO-HDLC, the CRC of zlib, gzip and PNG. Bit by bit, without a lookup table: the table would
/// be 1 KB of flash, for a check made once when a blob is opened (a few instructions a bit).
pub(crate) const CRC: crc::Crc<u32, crc::NoTable> =
    crc::Crc::<u32, crc::NoTable>::new(&crc::CRC_32_ISO_HDLC);

/// The total length in bytes that a blob's first [`PREAMBLE_LEN`] bytes declare, after checking its magic,
/// version and flags: what a reader of a stream needs to know how much to read.
pub fn declared_len(preamble: &[u8]) -> Result<usize, Error> {
    let p = Preamble::decode(preamble)?;
    PREAMBLE_LEN
        .checked_add(p.body_len as usize)
        .ok_or(Error::Inconsistent(Inconsistency::Layout))
}

/// The CRC-32 the preamble records for a body (same as zlib's `crc32`).
pub fn crc32(body: &[u8]) -> u32 {
    CRC.checksum(body)
}

/// A 16-byte-aligned wrapper for `include_bytes!`:
/// `static BLOB: &Aligned<[u8]> = &Aligned(*include_bytes!("model.mlb"));`
#[repr(C, align(16))]
pub struct Aligned<B: ?Sized>(pub B);

/// A blob whose preamble, CRC and header have been checked; the tensors are checked by [`crate::Model`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Blob<'a> {
    /// The decoded header.
    pub header: Header<'a>,
    /// The data section.
    pub data: &'a [u8],
    /// Total blob length in bytes.
    pub len: usize,
}

/// `n` rounded up to a multiple of [`ALIGN`].
pub(crate) const fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

impl<'a> Blob<'a> {
    /// Checks magic, version, length and CRC, and decodes the header.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, Error> {
        let p = Preamble::decode(bytes)?;
        let total = PREAMBLE_LEN
            .checked_add(p.body_len as usize)
            .ok_or(Error::Inconsistent(Inconsistency::Layout))?;
        if bytes.len() < total {
            return Err(Error::Truncated {
                expected: total,
                found: bytes.len(),
            });
        }
        if bytes.len() > total {
            return Err(Error::Inconsistent(Inconsistency::Layout));
        }
        let body = &bytes[PREAMBLE_LEN..];
        let crc = CRC.checksum(body);
        if crc != p.crc32 {
            return Err(Error::BadCrc {
                expected: p.crc32,
                found: crc,
            });
        }
        // `header_len <= body.len()` first: then `PREAMBLE_LEN + header_len <= total` cannot overflow.
        if p.header_len as usize > body.len() {
            return Err(Error::Inconsistent(Inconsistency::Layout));
        }
        let header_end = PREAMBLE_LEN + p.header_len as usize;
        let data_start = align_up(header_end);
        if data_start > total {
            return Err(Error::Inconsistent(Inconsistency::Layout));
        }
        let header = match postcard::take_from_bytes::<Header<'a>>(&bytes[PREAMBLE_LEN..header_end])
        {
            Ok((h, rest)) => match rest {
                [] => h,
                rest => match postcard::take_from_bytes::<TokenizerRecord>(rest) {
                    Ok((t, [])) => Header {
                        tokenizer: Some(t),
                        ..h
                    },
                    _ => match postcard::take_from_bytes::<header::Trailer<'a>>(rest) {
                        Ok((t, [])) => Header {
                            tokenizer: t.tokenizer,
                            integer: Some(t.plan),
                            ..h
                        },
                        _ => return Err(Error::BadHeader),
                    },
                },
            },
            _ => return Err(Error::BadHeader),
        };
        Ok(Blob {
            header,
            data: &bytes[data_start..],
            len: total,
        })
    }
}
