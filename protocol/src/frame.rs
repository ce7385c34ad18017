//! Frames: `COBS(VERSION ‖ postcard(message) ‖ CRC-32) ‖ 0x00`, written by [`FrameWriter`] and read byte
//! by byte by [`FrameReader`], which never panics and resynchronises at the next `0x00`.

use crc::{Crc, CRC_32_ISO_HDLC};
use serde::{Deserialize, Serialize};

use crate::message::ErrorKind;
use crate::{MAX_FRAME, MAX_PAYLOAD, VERSION};

/// CRC-32 (ISO HDLC, as zlib and Ethernet) of `VERSION ‖ message`, appended little-endian.
static CRC32: Crc<u32> = Crc::<u32>::new(&CRC_32_ISO_HDLC);

/// Bytes of the CRC.
const CRC_LEN: usize = 4;

/// Why a frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Not valid COBS.
    Framing,
    /// More than [`MAX_FRAME`] bytes before the delimiter.
    Oversized,
    /// Too short to hold a version and a CRC.
    Truncated,
    /// The CRC does not match.
    Crc,
    /// Another protocol version.
    Version(u8),
    /// The payload is not a message of the expected type.
    Malformed,
    /// The message does not fit in a frame (writing).
    TooLong,
}

impl From<FrameError> for ErrorKind {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::Framing => ErrorKind::Framing,
            FrameError::Oversized | FrameError::TooLong => ErrorKind::Oversized,
            FrameError::Truncated => ErrorKind::Truncated,
            FrameError::Crc => ErrorKind::Crc,
            FrameError::Version(v) => ErrorKind::Version(v),
            FrameError::Malformed => ErrorKind::Malformed,
        }
    }
}

impl core::fmt::Display for FrameError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FrameError::Framing => f.write_str("not a valid COBS frame"),
            FrameError::Oversized => write!(f, "frame longer than {MAX_FRAME} bytes"),
            FrameError::Truncated => f.write_str("frame too short for a version and a CRC"),
            FrameError::Crc => f.write_str("frame CRC-32 mismatch"),
            FrameError::Version(v) => write!(f, "protocol version {v}, not {VERSION}"),
            FrameError::Malformed => f.write_str("frame payload is not a valid message"),
            FrameError::TooLong => write!(f, "message longer than a {MAX_FRAME}-byte frame"),
        }
    }
}

/// Writes frames through fixed buffers: the payload, and its COBS encoding with the delimiter.
#[derive(Debug)]
pub struct FrameWriter {
    payload: [u8; MAX_PAYLOAD],
    frame: [u8; MAX_FRAME + 1],
}

impl Default for FrameWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameWriter {
    /// Empty buffers (`const`: a `static` on a device).
    pub const fn new() -> Self {
        FrameWriter {
            payload: [0; MAX_PAYLOAD],
            frame: [0; MAX_FRAME + 1],
        }
    }

    /// The whole frame of `msg`, delimiter included.
    pub fn frame<T: Serialize>(&mut self, msg: &T) -> Result<&[u8], FrameError> {
        let n = encode(msg, &mut self.payload, &mut self.frame)?;
        Ok(&self.frame[..n])
    }
}

/// Encodes `msg` as a frame into `out`, delimiter included, using `payload` as scratch; returns the
/// frame's length.
pub fn encode<T: Serialize>(
    msg: &T,
    payload: &mut [u8; MAX_PAYLOAD],
    out: &mut [u8; MAX_FRAME + 1],
) -> Result<usize, FrameError> {
    payload[0] = VERSION;
    let body_room = MAX_PAYLOAD - CRC_LEN;
    let body = postcard::to_slice(msg, &mut payload[1..body_room])
        .map_err(|_| FrameError::TooLong)?
        .len();
    let end = 1 + body;
    let crc = CRC32.checksum(&payload[..end]).to_le_bytes();
    payload[end..end + CRC_LEN].copy_from_slice(&crc);
    let n = cobs::try_encode(&payload[..end + CRC_LEN], &mut out[..MAX_FRAME])
        .map_err(|_| FrameError::TooLong)?;
    out[n] = 0;
    Ok(n + 1)
}

/// The message of a frame's payload body (from [`FrameReader::push`]): the whole body, nothing left over.
pub fn decode<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, FrameError> {
    match postcard::take_from_bytes(body) {
        Ok((msg, [])) => Ok(msg),
        _ => Err(FrameError::Malformed),
    }
}

/// Reads frames byte by byte into a buffer of `N` bytes (at least [`MAX_FRAME`] to read every valid
/// frame). Bytes past `N` before a delimiter make the frame [`FrameError::Oversized`]; empty frames
/// (consecutive delimiters) are skipped.
#[derive(Debug)]
pub struct FrameReader<const N: usize> {
    buf: [u8; N],
    len: usize,
    overflowed: bool,
}

impl<const N: usize> Default for FrameReader<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> FrameReader<N> {
    /// An empty reader.
    pub const fn new() -> Self {
        FrameReader {
            buf: [0; N],
            len: 0,
            overflowed: false,
        }
    }

    /// Forgets a partly read frame.
    pub fn clear(&mut self) {
        self.len = 0;
        self.overflowed = false;
    }

    /// Takes one byte: at a delimiter that ends a non-empty frame, the frame's message body (checked:
    /// COBS, length, CRC, version) or why it was refused; `None` otherwise.
    pub fn push(&mut self, byte: u8) -> Option<Result<&[u8], FrameError>> {
        if byte != 0 {
            match self.buf.get_mut(self.len) {
                Some(slot) => {
                    *slot = byte;
                    self.len += 1;
                }
                None => self.overflowed = true,
            }
            return None;
        }
        let (len, overflowed) = (self.len, self.overflowed);
        self.clear();
        if overflowed {
            return Some(Err(FrameError::Oversized));
        }
        if len == 0 {
            return None;
        }
        Some(check(&mut self.buf[..len]))
    }
}

/// Decodes the COBS frame `raw` in place and checks it; returns the message body.
fn check(raw: &mut [u8]) -> Result<&[u8], FrameError> {
    let n = cobs::decode_in_place(raw).map_err(|_| FrameError::Framing)?;
    let payload = raw.get(..n).ok_or(FrameError::Framing)?;
    if n < 1 + CRC_LEN {
        return Err(FrameError::Truncated);
    }
    let (data, crc) = payload.split_at(n - CRC_LEN);
    let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if CRC32.checksum(data) != crc {
        return Err(FrameError::Crc);
    }
    match data[0] {
        VERSION => Ok(&data[1..]),
        v => Err(FrameError::Version(v)),
    }
}
