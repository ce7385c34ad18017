//! Text lines built on the device without `core::fmt` (which would cost flash).

use microlens::analysis::Head;

use crate::model::{Token, N_CTX, N_HEADS, N_LAYERS};

/// Longest decimal `u32` plus a comma.
const TOKEN_CHARS: usize = 11;
/// Longest `L<layer>H<head>` plus a comma.
const HEAD_CHARS: usize = 2 * 10 + 3;

/// A line in a caller's buffer, appended to piece by piece (what does not fit is dropped). Not generic
/// over the buffer's length: one copy of its methods in flash serves every line.
struct Line<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> Line<'a> {
    fn new(buf: &'a mut [u8]) -> Self {
        Line { buf, len: 0 }
    }

    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    /// Appends `n` in decimal.
    fn decimal(&mut self, mut n: u32) {
        let mut digits = [0u8; 10];
        let mut len = 0;
        loop {
            digits[len] = b'0' + (n % 10) as u8;
            len += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        digits[..len].iter().rev().for_each(|&d| self.push(d));
    }

    /// Prints `{prefix}{line}` as one defmt line.
    fn print(&self, prefix: &str) {
        let bytes = self.buf.get(..self.len).unwrap_or_default();
        // Only ASCII (digits, letters, commas; printable text) is pushed. Checked all the same, but as ASCII: that
        // is a loop of a few bytes, where `str::from_utf8` links 0.6 KB of UTF-8 validation and tables.
        let text = if bytes.iter().all(u8::is_ascii) {
            // SAFETY: ASCII is valid UTF-8.
            unsafe { core::str::from_utf8_unchecked(bytes) }
        } else {
            "?"
        };
        defmt::println!("{=str}{=str}", prefix, text);
    }
}

/// Prints `{prefix}t0,t1,...` as one defmt line. Not inlined: its buffer lives only during the call,
/// not in the caller's frame under the forward pass (which sets the stack high-water mark).
#[inline(never)]
pub fn print_tokens(prefix: &str, tokens: &[Token]) {
    let mut buf = [0; N_CTX * TOKEN_CHARS];
    let mut line = Line::new(&mut buf);
    for (i, &t) in tokens.iter().enumerate() {
        if i > 0 {
            line.push(b',');
        }
        line.decimal(u32::from(t));
    }
    line.print(prefix);
}

/// Prints `{prefix}L1H0,L1H2,...` (TransformerLens's head names) as one defmt line; not inlined, as
/// [`print_tokens`].
#[inline(never)]
pub fn print_heads(prefix: &str, heads: &[Head]) {
    let mut buf = [0; N_LAYERS * N_HEADS * HEAD_CHARS];
    let mut line = Line::new(&mut buf);
    for (i, h) in heads.iter().enumerate() {
        if i > 0 {
            line.push(b',');
        }
        line.push(b'L');
        line.decimal(h.layer as u32);
        line.push(b'H');
        line.decimal(h.head as u32);
    }
    line.print(prefix);
}

/// Prints `{prefix}"text"` as one defmt line: the tokens as bytes between quotes, each byte that is not
/// printable ASCII shown as `?`; not inlined, as [`print_tokens`].
#[inline(never)]
pub fn print_text(prefix: &str, tokens: &[Token]) {
    let mut buf = [0; N_CTX + 2];
    let mut line = Line::new(&mut buf);
    line.push(b'"');
    for &t in tokens {
        let printable = (0x20..0x7f).contains(&u32::from(t));
        line.push(if printable { t as u8 } else { b'?' });
    }
    line.push(b'"');
    line.print(prefix);
}
