//! The int4 x int8 dot product: packed symmetric int4 weights (two per byte, low nibble first) in groups
//! of [`I4_GROUP`] along a row, each group with its own scale, against int8 or int16 activations.

use super::activations::Wide;
use super::groups;
pub(crate) use crate::arch::nibble;
use crate::arch::nibbles_dot as dot_i32;
use crate::blob::I4_GROUP;

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

#[cfg(test)]
mod tests {
    use super::*;

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
