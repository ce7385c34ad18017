//! A walk over a `.pth` file's pickle before candle parses it: every opcode's argument lies inside the
//! file, every integer is one a state dict can hold (`0 <= n < 2^48`: sizes, strides, offsets), and the
//! objects the pickle builds stay within [`MAX_DEPTH`] levels of nesting and [`MAX_OBJECTS`] objects.
//!
//! candle's pickle reader trusts its input: a `LONG1` of more than 8 bytes overflows a shift, a
//! negative or huge storage offset overflows a multiplication, a string length allocates whatever it
//! says, objects nested 300,000 deep overflow the stack when they are dropped, and a memo entry fetched
//! twice into each next one doubles in size at every step (it is copied, not shared). Refused here
//! first, such a file gets one clear error instead.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};

/// The largest integer a state dict's pickle may hold (sizes, strides, offsets, versions).
const INT_LIMIT: i64 = 1 << 48;

/// The deepest nesting of objects accepted (a state dict nests about five levels).
pub const MAX_DEPTH: u32 = 256;

/// The most objects one pickled value may expand to, memo copies included (a state dict holds about
/// twenty per tensor).
pub const MAX_OBJECTS: u64 = 1 << 24;

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

/// An object on the simulated stack: how deep it nests and how many objects it holds (itself included).
#[derive(Clone, Copy, Debug)]
struct Shape {
    depth: u32,
    objects: u64,
}

const LEAF: Shape = Shape {
    depth: 1,
    objects: 1,
};

/// The pickle machine's stack, objects reduced to their [`Shape`].
#[derive(Default)]
struct Machine {
    stack: Vec<Shape>,
    marks: Vec<usize>,
    memo: HashMap<u64, Shape>,
}

fn malformed() -> anyhow::Error {
    anyhow::anyhow!("the pickle in the .pth file is malformed (its stack underflows)")
}

impl Machine {
    fn pop(&mut self) -> Result<Shape> {
        self.stack.pop().ok_or_else(malformed)
    }

    fn top(&mut self) -> Result<&mut Shape> {
        self.stack.last_mut().ok_or_else(malformed)
    }

    /// The objects above the last mark, removed with it.
    fn pop_mark(&mut self) -> Result<Vec<Shape>> {
        let at = self.marks.pop().ok_or_else(malformed)?;
        if at > self.stack.len() {
            return Err(malformed());
        }
        Ok(self.stack.split_off(at))
    }

    /// `parent` holding `children`, refused past the limits.
    fn grow(parent: Shape, children: &[Shape]) -> Result<Shape> {
        let depth = children
            .iter()
            .map(|c| c.depth + 1)
            .fold(parent.depth, u32::max);
        let objects = children
            .iter()
            .fold(parent.objects, |n, c| n.saturating_add(c.objects));
        if depth > MAX_DEPTH {
            bail!("the pickle in the .pth file nests objects deeper than {MAX_DEPTH} levels");
        }
        if objects > MAX_OBJECTS {
            bail!("the pickle in the .pth file expands to more than {MAX_OBJECTS} objects");
        }
        Ok(Shape { depth, objects })
    }

    fn push_new(&mut self, children: &[Shape]) -> Result<()> {
        let shape = Self::grow(LEAF, children)?;
        self.stack.push(shape);
        Ok(())
    }

    /// Adds `children` into the object on top of the stack.
    fn add_to_top(&mut self, children: &[Shape]) -> Result<()> {
        let top = *self.top()?;
        *self.top()? = Self::grow(top, children)?;
        Ok(())
    }

    /// Applies `op`'s effect on the stack, memo and marks; `index` is a memo opcode's argument.
    fn step(&mut self, op: u8, index: u64) -> Result<()> {
        match op {
            b'(' => self.marks.push(self.stack.len()),
            b'0' => {
                self.pop()?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let top = *self.top()?;
                self.stack.push(top);
            }
            // Memo: PUT, BINPUT, LONG_BINPUT, MEMOIZE; GET, BINGET, LONG_BINGET.
            b'p' | b'q' | b'r' | 0x94 => {
                let top = *self.top()?;
                self.memo.insert(index, top);
            }
            b'g' | b'h' | b'j' => {
                let shape = *self.memo.get(&index).ok_or_else(malformed)?;
                self.stack.push(shape);
            }
            // Containers from the marked objects: TUPLE, LIST, DICT, FROZENSET, INST, OBJ.
            b't' | b'l' | b'd' | 0x91 | b'i' | b'o' => {
                let items = self.pop_mark()?;
                self.push_new(&items)?;
            }
            // TUPLE1..3, BINPERSID, REDUCE, NEWOBJ, NEWOBJ_EX.
            0x85 | b'Q' | 0x86 | b'R' | 0x81 | 0x87 | 0x92 => {
                let n = match op {
                    0x85 | b'Q' => 1,
                    0x86 | b'R' | 0x81 => 2,
                    _ => 3,
                };
                let at = self.stack.len().checked_sub(n).ok_or_else(malformed)?;
                let items = self.stack.split_off(at);
                self.push_new(&items)?;
            }
            // Into the object below: APPEND, BUILD (one), SETITEM (two), APPENDS, SETITEMS, ADDITEMS.
            b'a' | b'b' => {
                let item = self.pop()?;
                self.add_to_top(&[item])?;
            }
            b's' => {
                let (v, k) = (self.pop()?, self.pop()?);
                self.add_to_top(&[k, v])?;
            }
            b'e' | b'u' | 0x90 => {
                let items = self.pop_mark()?;
                self.add_to_top(&items)?;
            }
            // STACK_GLOBAL and READONLY_BUFFER replace the top (two, one) by a new leaf.
            0x93 => {
                self.pop()?;
                self.pop()?;
                self.stack.push(LEAF);
            }
            0x98 => {
                self.pop()?;
                self.stack.push(LEAF);
            }
            // No stack effect: PROTO, FRAME, STOP.
            0x80 | 0x95 | b'.' => {}
            // Everything else pushes one new leaf (constants, strings, GLOBAL, PERSID, EXT*, empty
            // containers, NEXT_BUFFER).
            _ => self.stack.push(LEAF),
        }
        Ok(())
    }
}

/// Checks a pickle's opcodes up to its `STOP`.
pub(super) fn check(pickle: &[u8]) -> Result<()> {
    let mut at = 0usize;
    let mut machine = Machine::default();
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
        let mut index = 0;
        match layout {
            Arg::None => {}
            Arg::Fixed(n) => {
                index = le(take(&mut at, n)?);
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
                let start = at;
                for _ in 0..n {
                    let rest = &pickle[at..];
                    let line = rest.iter().position(|&c| c == b'\n');
                    at += line.context("the pickle in the .pth file is truncated")? + 1;
                }
                if matches!(op, b'p' | b'g') {
                    let text = std::str::from_utf8(&pickle[start..at - 1]).ok();
                    index = text
                        .and_then(|t| t.trim().parse().ok())
                        .ok_or_else(malformed)?;
                }
            }
        }
        if op == 0x94 {
            index = machine.memo.len() as u64;
        }
        machine.step(op, index)?;
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

    #[test]
    fn deep_or_exploding_pickles_are_refused() {
        let mut deep = vec![0x80, 2, b')'];
        deep.extend(std::iter::repeat_n(0x85, super::MAX_DEPTH as usize));
        deep.push(b'.');
        let err = check(&deep).unwrap_err().to_string();
        assert!(err.contains("deeper"), "{err}");
        deep.drain(3..4);
        check(&deep).unwrap();
        // `x = (); x = (x, x)` 30 times: 2^31 objects once copied out of the memo.
        let mut laughs = vec![0x80, 2, b')', b'q', 0];
        for _ in 0..30 {
            laughs.extend([b'h', 0, b'h', 0, 0x86, b'q', 0]);
        }
        laughs.push(b'.');
        let err = check(&laughs).unwrap_err().to_string();
        assert!(err.contains("objects"), "{err}");
        for underflow in [&[0x80, 2, 0x85, b'.'][..], b"t.", &[b'h', 7, b'.']] {
            assert!(check(underflow).is_err(), "{underflow:?}");
        }
    }

    /// The `data.pkl` of the attn_only_2l fixture's `.pth`.
    fn fixture_pickle() -> Vec<u8> {
        use std::io::Read;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/attn_only_2l/model.pth"
        );
        let bytes = std::fs::read(path).unwrap();
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
        let name = zip
            .file_names()
            .filter_map(|n| n.ok())
            .find(|n| n.ends_with("data.pkl"))
            .unwrap()
            .into_owned();
        let mut pickle = Vec::new();
        zip.by_name(&name)
            .unwrap()
            .read_to_end(&mut pickle)
            .unwrap();
        pickle
    }

    proptest::proptest! {
        /// A real state dict's pickle with a few bytes changed, or cut short, is parsed or refused,
        /// never a panic.
        #[test]
        fn mutated_state_dict_pickles_never_panic(
            edits in proptest::collection::vec((0usize..1 << 16, 0u8..=255), 1..6),
            cut in proptest::option::of(0usize..1 << 16),
        ) {
            let mut pickle = fixture_pickle();
            let n = pickle.len();
            for (at, byte) in edits {
                pickle[at % n] = byte;
            }
            if let Some(cut) = cut {
                pickle.truncate(cut % n);
            }
            let _ = crate::import::parse_pickle(&pickle);
        }
    }
}
