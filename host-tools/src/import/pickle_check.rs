//! A walk over a `.pth` file's pickle before candle parses it: every opcode's argument lies inside the
//! file, and every integer is one a state dict can hold (`0 <= n < 2^48`: sizes, strides, offsets).
//!
//! candle's pickle reader trusts its input: a `LONG1` of more than 8 bytes overflows a shift, a
//! negative or huge storage offset overflows a multiplication, a string length allocates whatever it
//! says. Refused here first, such a file gets one clear error instead.

use anyhow::{bail, Context, Result};

/// The largest integer a state dict's pickle may hold (sizes, strides, offsets, versions).
const INT_LIMIT: i64 = 1 << 48;

/// How an opcode's argument is laid out.
enum Arg {
    /// No argument.
    None,
    /// A fixed number of bytes.
    Fixed(usize),
    /// A signed 32-bit little-endian integer (`BININT`).
    Int32,
    /// A little-endian length of this many bytes, then that many bytes.
    Counted(usize),
    /// `LONG1`: a one-byte length, then a little-endian two's-complement integer.
    Long1,
    /// This many newline-terminated lines.
    Lines(usize),
}

/// The argument layout of a pickle opcode (protocols 0-5), `None` for an unknown one.
fn arg(op: u8) -> Option<Arg> {
    Some(match op {
        b'(' | b'.' | b'0' | b'1' | b'2' | b'N' | b')' | b']' | b'}' | b'a' | b'e' | b's'
        | b'u' | b't' | b'R' | b'b' | b'Q' | b'd' | b'l' | b'o' => Arg::None,
        0x85..=0x89 | 0x81 | 0x8f..=0x94 | 0x97 | 0x98 => Arg::None,
        b'K' | b'q' | b'h' | 0x80 | 0x82 => Arg::Fixed(1),
        b'M' | 0x83 => Arg::Fixed(2),
        b'r' | b'j' | 0x84 => Arg::Fixed(4),
        b'G' | 0x95 => Arg::Fixed(8),
        b'J' => Arg::Int32,
        b'U' | b'C' | 0x8c => Arg::Counted(1),
        b'T' | b'B' | b'X' => Arg::Counted(4),
        0x8d | 0x8e | 0x96 => Arg::Counted(8),
        0x8a => Arg::Long1,
        b'I' | b'L' | b'S' | b'V' | b'F' | b'p' | b'g' | b'P' => Arg::Lines(1),
        b'c' | b'i' => Arg::Lines(2),
        _ => return None,
    })
}

/// Little-endian unsigned integer of `bytes` (at most 8).
fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |v, &b| (v << 8) | u64::from(b))
}

/// Checks a pickle's opcodes up to its `STOP`.
pub(super) fn check(pickle: &[u8]) -> Result<()> {
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> Result<&[u8]> {
        let end = at.checked_add(n).filter(|&e| e <= pickle.len());
        let end = end.context("the pickle in the .pth file is truncated")?;
        let out = &pickle[*at..end];
        *at = end;
        Ok(out)
    };
    loop {
        let op = take(&mut at, 1)?[0];
        let Some(layout) = arg(op) else {
            bail!("the pickle in the .pth file has an unknown opcode 0x{op:02x}");
        };
        match layout {
            Arg::None => {}
            Arg::Fixed(n) => {
                take(&mut at, n)?;
            }
            Arg::Int32 => {
                let b = take(&mut at, 4)?;
                if i32::from_le_bytes([b[0], b[1], b[2], b[3]]) < 0 {
                    bail!(
                        "the pickle in the .pth file holds a negative integer (not a state dict)"
                    );
                }
            }
            Arg::Counted(width) => {
                let len = le(take(&mut at, width)?);
                take(&mut at, usize::try_from(len).unwrap_or(usize::MAX))?;
            }
            Arg::Long1 => {
                let n = usize::from(take(&mut at, 1)?[0]);
                let b = take(&mut at, n)?;
                let fits = n <= 8 && (n == 0 || b[n - 1] & 0x80 == 0) && le(b) < INT_LIMIT as u64;
                if !fits {
                    bail!(
                        "the pickle in the .pth file holds an integer out of a state dict's range"
                    );
                }
            }
            Arg::Lines(n) => {
                for _ in 0..n {
                    let rest = &pickle[at..];
                    let line = rest.iter().position(|&c| c == b'\n');
                    at += line.context("the pickle in the .pth file is truncated")? + 1;
                }
            }
        }
        if op == b'.' {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn a_state_dict_pickle_passes() {
        // PROTO 2, EMPTY_DICT, SHORT_BINUNICODE "a", LONG1 (2 bytes) 300, SETITEM, STOP
        let ok = [
            0x80, 2, b'}', 0x8c, 1, b'a', 0x8a, 2, 0x2c, 0x01, b's', b'.',
        ];
        check(&ok).unwrap();
    }

    #[test]
    fn hostile_pickles_are_refused() {
        let long9 = [0x80, 2, 0x8a, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, b'.'];
        let negative = [0x80, 2, b'J', 0xff, 0xff, 0xff, 0xff, b'.'];
        let huge_string = [0x80, 2, b'X', 0xff, 0xff, 0xff, 0x7f, b'a', b'.'];
        let unknown = [0x80, 2, 0xff, b'.'];
        let no_stop = [0x80, 2, b'}'];
        for bad in [&long9[..], &negative, &huge_string, &unknown, &no_stop] {
            assert!(check(bad).is_err(), "{bad:?}");
        }
    }
}
