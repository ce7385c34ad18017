//! Packed int4 values (two per byte, low nibble first, as the blob stores `I4` rows) and their exact
//! dot product with int8 values: the plain Rust the float arithmetic's int4 matmuls
//! (`quant::int4`) and the integer arithmetic's (`integer::units`) share.

/// Nibble `c` of a packed row, sign-extended: the low nibble of byte `c / 2` for even `c`, the high one
/// for odd `c`. Missing bytes read as 0.
#[inline]
pub(crate) fn nibble(row: &[u8], c: usize) -> i32 {
    let b = row.get(c / 2).copied().unwrap_or(0);
    let n = if c % 2 == 1 { b >> 4 } else { b & 0x0f };
    ((n << 4) as i8 >> 4) as i32
}

/// `sum_i w[c + i] * x[i]` in `i32`, two nibbles per byte where `c` is even; called with at most one
/// group (`|w x| <= 1024`, so any length up to 2^21 is exact).
pub(crate) fn nibbles_dot(row: &[u8], c: usize, x: &[i8]) -> i32 {
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
    fn the_dot_is_the_sum_of_the_nibbles_times_the_inputs_from_any_start() {
        let row = [0x8f_u8, 0x71, 0x5a, 0xc3];
        let x = [3i8, -128, 127, -1, 5, 9, -7];
        for c in 0..8 {
            for n in 0..=(8 - c).min(x.len()) {
                let want: i32 = (0..n).map(|i| nibble(&row, c + i) * i32::from(x[i])).sum();
                assert_eq!(nibbles_dot(&row, c, &x[..n]), want, "{c} {n}");
            }
        }
    }
}
