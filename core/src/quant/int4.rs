//! The int4 x int8 dot product: packed symmetric int4 weights (two per byte, low nibble first) in groups
//! of [`I4_GROUP`] along a row, each group with its own scale, against int8 or int16 activations.

use super::activations::Wide;
use super::groups;
use crate::blob::I4_GROUP;

/// Nibble `c` of a packed row, sign-extended: the low nibble of byte `c / 2` for even `c`, the high one
/// for odd `c`. Missing bytes read as 0.
#[inline]
pub fn nibble(row: &[u8], c: usize) -> i32 {
    let b = row.get(c / 2).copied().unwrap_or(0);
    let n = if c % 2 == 1 { b >> 4 } else { b & 0x0f };
    ((n << 4) as i8 >> 4) as i32
}

/// `sum_g (acc_g * scale(g))` over the groups met by columns `c0 .. c0 + x.len()` of one packed row, with
/// `acc_g = sum_c w[c] * x[c]` exact in `i32` and the groups added in order. `scale(g)` is the scale of
/// group `g` of the row.
pub fn dot(row: &[u8], c0: usize, x: &[i8], scale: impl Fn(usize) -> f32) -> f32 {
    let piece = |a: usize, b: usize| dot_i32(row, a, x.get(a - c0..b - c0).unwrap_or(&[]));
    groups::sum(c0, x.len(), I4_GROUP, piece, scale)
}

/// [`dot`] against int16 activations: columns `c0 .. c0 + n` of one packed row times `x.get(c0 + i)`
/// ([`Wide`]), each group's sum exact in `i32` (`32 * 8 * 32767 < 2^23`), scaled and added in order.
pub fn dot_wide(row: &[u8], c0: usize, n: usize, x: Wide<'_>, scale: impl Fn(usize) -> f32) -> f32 {
    let piece = |a, b| (a..b).fold(0i32, |acc, c| acc + nibble(row, c) * x.get(c));
    groups::sum(c0, n, I4_GROUP, piece, scale)
}

/// `sum_i w[c + i] * x[i]` in `i32`, two nibbles per byte where `c` is even; called with at most one
/// group (`|w x| <= 1024`, so any length up to 2^21 is exact).
pub(crate) fn dot_i32(row: &[u8], c: usize, x: &[i8]) -> i32 {
    let (mut acc, mut x, mut c) = (0i32, x, c);
    if c % 2 == 1 {
        if let Some((&first, rest)) = x.split_first() {
            acc += nibble(row, c) * first as i32;
            (x, c) = (rest, c + 1);
        }
    }
    let bytes = row.get(c / 2..).unwrap_or(&[]);
    let pairs = x.chunks_exact(2);
    let last = pairs
        .remainder()
        .first()
        .map(|&xi| nibble(row, c + x.len() - 1) * xi as i32);
    for (&b, p) in bytes.iter().zip(pairs) {
        let (lo, hi) = (((b << 4) as i8 >> 4) as i32, (b as i8 >> 4) as i32);
        acc += lo * p[0] as i32 + hi * p[1] as i32;
    }
    acc + last.unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibbles_are_low_first_and_signed() {
        let row = [0x8f_u8, 0x71];
        assert_eq!(
            (0..4)
                .map(|c| nibble(&row, c))
                .collect::<std::vec::Vec<_>>(),
            [-1, -8, 1, 7]
        );
        assert_eq!(nibble(&row, 9), 0);
    }

    #[test]
    fn groups_are_scaled_separately() {
        // 40 columns: group 0 has 32 weights of 1, group 1 has 8 weights of -2.
        let mut row = [0x11u8; 20];
        row[16..].fill(0xee);
        let x = [1i8; 40];
        let got = dot(&row, 0, &x, |g| [0.5, 0.25][g]);
        assert_eq!(got, 32.0 * 0.5 + -16.0 * 0.25);
        assert_eq!(
            dot(&row, 30, &x[..4], |g| [0.5, 0.25][g]),
            2.0 * 0.5 - 4.0 * 0.25
        );
    }

    #[test]
    fn packed_pairs_equal_nibble_by_nibble() {
        let row: std::vec::Vec<u8> = (0..40u32).map(|i| (i * 37 + 11) as u8).collect();
        let x: std::vec::Vec<i8> = (0..80i32).map(|i| (i * 29 % 255 - 127) as i8).collect();
        for c in 0..9 {
            for n in [0, 1, 2, 5, 32, 71 - c] {
                let want: i32 = (0..n).map(|i| nibble(&row, c + i) * x[i] as i32).sum();
                assert_eq!(dot_i32(&row, c, &x[..n]), want, "c {c} n {n}");
            }
        }
    }
}
