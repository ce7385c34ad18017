//! How a blob stores an `I8` matrix: in quads of four rows, each quad's rows interleaved a word at a
//! time, so that the four-row kernel reads one quad's four weight words of a group with one load.
//!
//! For a `[rows, cols]` matrix with `g = cols / 4` groups and `t = cols % 4` tail columns: quad `q`
//! (rows `4q .. 4q + 4`, for every whole quad) holds bytes `[4q * cols, (4q + 4) * cols)`: for each
//! group `j < g` the 16 bytes `row0[4j .. 4j + 4], row1[..], row2[..], row3[..]`, then the `t` tail
//! columns of row 0, of row 1, of row 2, of row 3. The last `rows % 4` rows follow row-major. The same
//! bytes as row-major, permuted: the matrix's length and every value are unchanged.

/// Rows per quad.
pub const QUAD: usize = 4;

/// Where row `r` of an `I8` `[rows, cols]` matrix lies in its bytes: its `cols / 4` whole words
/// `step` bytes apart from `start`, then its `cols % 4` tail bytes from `tail`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowPlace {
    /// Offset of the row's first word (of its first byte when it has no whole word).
    pub start: usize,
    /// Bytes from one word of the row to the next: 16 in a quad, 4 in the row-major rest.
    pub step: usize,
    /// Offset of the row's tail columns.
    pub tail: usize,
}

impl RowPlace {
    /// Offset of row `r`'s column `c` (`c < cols`), with `cols` the matrix's columns (wrapping
    /// beyond the addressable, where no matrix lies).
    #[inline(always)]
    pub fn at(&self, cols: usize, c: usize) -> usize {
        let body = cols / 4 * 4;
        match c < body {
            true => self.start.wrapping_add(c / 4 * self.step + c % 4),
            false => self.tail.wrapping_add(c - body),
        }
    }

    /// Offset of the row's first byte when its `cols` bytes are contiguous (a row of the row-major
    /// rest, or of a quad without whole words), else `None`.
    #[inline(always)]
    pub fn contiguous(&self, cols: usize) -> Option<usize> {
        match (self.step, cols / 4) {
            (4, _) => Some(self.start),
            (_, 0) => Some(self.tail),
            _ => None,
        }
    }
}

/// Where row `r < rows` of an `I8` `[rows, cols]` matrix lies (offsets beyond the data for a row
/// beyond the matrix; the readers check them).
#[inline(always)]
pub fn row_place(rows: usize, cols: usize, r: usize) -> RowPlace {
    let whole = rows - rows % QUAD;
    let body = cols / 4 * 4;
    if r < whole {
        // `r < rows`: within a matrix of `rows * cols` bytes nothing overflows (wrapping beyond).
        let quad = (r / QUAD * QUAD).wrapping_mul(cols);
        let k = r % QUAD;
        RowPlace {
            start: quad.wrapping_add(4 * k),
            step: 16,
            tail: quad.wrapping_add(QUAD.wrapping_mul(body).wrapping_add(k * (cols - body))),
        }
    } else {
        let start = r.saturating_mul(cols);
        RowPlace {
            start,
            step: 4,
            tail: start.saturating_add(body),
        }
    }
}

/// Offset of element `(r, c)` of an `I8` `[rows, cols]` matrix in its blob bytes.
#[inline]
pub fn offset(rows: usize, cols: usize, r: usize, c: usize) -> usize {
    row_place(rows, cols, r).at(cols, c)
}

/// Row `r` of an `I8` `[rows, cols]` matrix stored as `data`: its whole words in order (each 4 bytes,
/// fewer where `data` ends) and its tail bytes (`cols % 4`, fewer where `data` ends).
#[inline(always)]
pub fn row_parts(
    data: &[u8],
    rows: usize,
    cols: usize,
    r: usize,
) -> (impl Iterator<Item = &[u8]> + '_, &[u8]) {
    let place = row_place(rows, cols, r);
    let body = cols / 4 * 4;
    let words = data.get(place.start..).unwrap_or(&[]);
    let words = words
        .chunks(place.step)
        .take(body / 4)
        .map(|w| &w[..w.len().min(4)]);
    let tail = data.get(place.tail..).unwrap_or(&[]);
    (words, &tail[..tail.len().min(cols - body)])
}

/// The bytes of row `r` of an `I8` `[rows, cols]` matrix stored as `data`, from column `c0`, as many
/// as `n` (fewer where the row or `data` ends).
#[inline]
pub fn row_bytes(
    data: &[u8],
    rows: usize,
    cols: usize,
    r: usize,
    c0: usize,
    n: usize,
) -> impl Iterator<Item = u8> + '_ {
    let (words, tail) = row_parts(data, rows, cols, r);
    words.flatten().chain(tail).skip(c0).take(n).copied()
}

/// Each quad's bytes of an `I8` matrix of `cols` columns stored as `data`, in order (the last one
/// shorter where `data` ends), then empty ones without end: what the four-row kernels walk.
#[inline(always)]
pub fn quads_of(data: &[u8], cols: usize) -> impl Iterator<Item = &[u8]> {
    let quad = cols.saturating_mul(QUAD).max(1);
    data.chunks(quad).chain(core::iter::repeat(&[][..]))
}

/// An `I8` `[rows, cols]` matrix's row-major bytes in the blob's layout (as long as `row_major`;
/// the bytes of a matrix shorter than `rows * cols` are returned as they are).
#[cfg(feature = "std")]
pub fn from_row_major(rows: usize, cols: usize, row_major: &[u8]) -> std::vec::Vec<u8> {
    let mut out = row_major.to_vec();
    if rows.checked_mul(cols) == Some(row_major.len()) {
        for (i, &b) in row_major.iter().enumerate() {
            out[offset(rows, cols, i / cols, i % cols)] = b;
        }
    }
    out
}

/// The inverse of [`from_row_major`]: an `I8` matrix's blob bytes in row-major order.
#[cfg(feature = "std")]
pub fn to_row_major(rows: usize, cols: usize, blob: &[u8]) -> std::vec::Vec<u8> {
    let mut out = blob.to_vec();
    if rows.checked_mul(cols) == Some(blob.len()) {
        for (i, o) in out.iter_mut().enumerate() {
            *o = blob[offset(rows, cols, i / cols, i % cols)];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn the_layout_is_a_permutation_and_round_trips() {
        for (rows, cols) in [
            (0, 5),
            (1, 1),
            (3, 7),
            (4, 4),
            (5, 3),
            (8, 13),
            (9, 16),
            (12, 2),
        ] {
            let n = rows * cols;
            let mut seen = std::vec![false; n];
            for r in 0..rows {
                for c in 0..cols {
                    let o = offset(rows, cols, r, c);
                    assert!(o < n && !seen[o], "{rows}x{cols} ({r}, {c})");
                    seen[o] = true;
                }
            }
            let data: Vec<u8> = (0..n).map(|i| (i * 37 + 1) as u8).collect();
            let blob = from_row_major(rows, cols, &data);
            assert_eq!(to_row_major(rows, cols, &blob), data, "{rows}x{cols}");
            for r in 0..rows {
                let row: Vec<u8> = row_bytes(&blob, rows, cols, r, 0, cols).collect();
                assert_eq!(
                    row,
                    &data[r * cols..(r + 1) * cols],
                    "{rows}x{cols} row {r}"
                );
                let part: Vec<u8> = row_bytes(&blob, rows, cols, r, 1, 3).collect();
                let want = &data[r * cols..(r + 1) * cols];
                assert_eq!(part, &want[1.min(cols)..4.min(cols)]);
            }
        }
    }

    #[test]
    fn a_quad_interleaves_its_rows_word_by_word_then_the_tails() {
        // Rows 0-3 of 6 columns: one group, two tail columns each; rows 4 and 5 row-major.
        let (rows, cols) = (6, 6);
        let data: Vec<u8> = (0..36).collect();
        let blob = from_row_major(rows, cols, &data);
        let want: Vec<u8> = [
            0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15, 18, 19, 20, 21, 4, 5, 10, 11, 16, 17, 22, 23,
        ]
        .into_iter()
        .chain(24..36)
        .collect();
        assert_eq!(blob, want);
    }
}
