//! The fixed 20-byte preamble, raw little-endian, readable before anything is decoded.
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `MLNS` |
//! | 4..6 | format version (u16) |
//! | 6..8 | flags (u16, none defined: must be 0) |
//! | 8..12 | header length in bytes (u32) |
//! | 12..16 | body length: bytes after the preamble (u32) |
//! | 16..20 | CRC-32 (ISO-HDLC, as zlib's `crc32`) of the body |

use crate::error::Error;

/// First four bytes of every blob.
pub const MAGIC: [u8; 4] = *b"MLNS";
/// Format version this crate writes and reads: 3 adds grouped-query attention and gated MLPs to the
/// config (`n_key_value_heads`, `gated_mlp`) and `W_gate` to the tensor kinds; 2 stored `I8` matrices in
/// quads of rows ([`super::quads`]) as 3 does; version 1 stored them row-major.
pub const VERSION: u16 = 3;
/// Preamble size in bytes.
pub const PREAMBLE_LEN: usize = 20;

/// The decoded preamble.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preamble {
    /// Format version.
    pub version: u16,
    /// Flags.
    pub flags: u16,
    /// Bytes of the postcard header, which starts right after the preamble.
    pub header_len: u32,
    /// Bytes after the preamble: header, padding and data.
    pub body_len: u32,
    /// CRC-32 of those bytes.
    pub crc32: u32,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Preamble {
    /// Decodes and checks magic, version and flags.
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        let magic_len = bytes.len().min(MAGIC.len());
        if bytes[..magic_len] != MAGIC[..magic_len] {
            return Err(Error::BadMagic);
        }
        let Some(b) = bytes.get(..PREAMBLE_LEN) else {
            return Err(Error::Truncated {
                expected: PREAMBLE_LEN,
                found: bytes.len(),
            });
        };
        let p = Preamble {
            version: le16(b, 4),
            flags: le16(b, 6),
            header_len: le32(b, 8),
            body_len: le32(b, 12),
            crc32: le32(b, 16),
        };
        if p.version != VERSION {
            return Err(Error::UnsupportedVersion { found: p.version });
        }
        if p.flags != 0 {
            return Err(Error::UnsupportedFlags { found: p.flags });
        }
        Ok(p)
    }

    /// Encodes the preamble.
    #[cfg(feature = "std")]
    pub fn encode(&self) -> [u8; PREAMBLE_LEN] {
        let mut out = [0u8; PREAMBLE_LEN];
        out[..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&self.version.to_le_bytes());
        out[6..8].copy_from_slice(&self.flags.to_le_bytes());
        out[8..12].copy_from_slice(&self.header_len.to_le_bytes());
        out[12..16].copy_from_slice(&self.body_len.to_le_bytes());
        out[16..20].copy_from_slice(&self.crc32.to_le_bytes());
        out
    }
}
