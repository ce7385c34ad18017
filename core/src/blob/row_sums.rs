//! The stored row sums of an `I8` matrix whose input the forward pass centres (`W_out` under integer
//! activations, [`crate::quant::offset`]): `sum_j W[r][j]` of every row, exact, as little-endian `i32`s,
//! computed once by the writer so that the forward pass need not recompute them every token.
//!
//! They are part of the tensor's side data, the `scales_len` bytes at `scales_offset` of its table
//! entry: the `f16` scales, zero padding to a multiple of [`ROW_SUM_BYTES`], then one sum per row. A
//! side region of exactly the scales' length has no sums (every dtype but `I8`, every blob written
//! before they existed); any other length is [`crate::Inconsistency::Length`], and sums that are not
//! the matrix's own are [`crate::Inconsistency::RowSums`] (`Model::from_bytes` checks them).

use super::{DType, SCALE_BYTES};

/// Bytes of one stored row sum: an `i32`, little-endian.
pub const ROW_SUM_BYTES: usize = 4;

/// Where the row sums start in the side data of a matrix with `n_scales` scales.
#[cfg(feature = "std")]
const fn start(n_scales: usize) -> usize {
    (n_scales * SCALE_BYTES).next_multiple_of(ROW_SUM_BYTES)
}

/// The length in bytes of the side data of a `dtype` matrix of `rows` rows with `n_scales` scales, with
/// its row sums (`None` for the dtypes that have none, or on overflow).
pub(crate) fn side_len(dtype: DType, rows: usize, n_scales: usize) -> Option<usize> {
    let sums = rows.checked_mul(ROW_SUM_BYTES)?;
    let scales = n_scales.checked_mul(SCALE_BYTES)?;
    let start = scales.checked_next_multiple_of(ROW_SUM_BYTES)?;
    (dtype == DType::I8).then_some(start.checked_add(sums)?)
}

/// The side data `side` of a `dtype` matrix of `rows` rows (its `f16` scales, then maybe its row sums)
/// split into its scales and its row sums: the sums are empty unless `side` is an `I8` matrix's longer
/// than its scales (`Model::from_bytes` has checked the length: any longer `side` holds `rows` sums).
#[inline(always)]
pub(crate) fn split(dtype: DType, rows: usize, side: &[u8]) -> (&[u8], &[u8]) {
    let scales = rows.wrapping_mul(SCALE_BYTES);
    match (dtype, side.len() > scales) {
        (DType::I8, true) => {
            let (scales, rest) = side.split_at(scales);
            // The padding: 0 or 2 bytes (the scales are 2 bytes each).
            let pad = scales.len().wrapping_neg() % ROW_SUM_BYTES;
            (scales, rest.get(pad..).unwrap_or(&[]))
        }
        _ => (side, &[]),
    }
}

/// Stored sum `r` of `sums` (`None` past the end).
#[inline(always)]
pub(crate) fn at(sums: &[u8], r: usize) -> Option<i32> {
    let at = r.checked_mul(ROW_SUM_BYTES)?;
    let b = sums.get(at..at.checked_add(ROW_SUM_BYTES)?)?;
    Some(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// The side data to store after the `n_scales` scales of an `I8` matrix of `rows` rows of `cols` columns,
/// row-major `data`: the padding, then the exact row sums; `None` if a sum does not fit an `i32` or
/// `data` is not `rows * cols` bytes.
#[cfg(feature = "std")]
pub(crate) fn encode(
    rows: usize,
    cols: usize,
    n_scales: usize,
    data: &[u8],
) -> Option<std::vec::Vec<u8>> {
    if rows.checked_mul(cols)? != data.len() {
        return None;
    }
    let mut out = std::vec![0u8; start(n_scales) - n_scales * SCALE_BYTES];
    for row in data.chunks_exact(cols.max(1)).take(rows) {
        let sum: i64 = row.iter().map(|&b| i64::from(b as i8)).sum();
        out.extend_from_slice(&i32::try_from(sum).ok()?.to_le_bytes());
    }
    // A matrix without columns: every sum 0.
    out.resize(
        start(n_scales) - n_scales * SCALE_BYTES + rows * ROW_SUM_BYTES,
        0,
    );
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_follow_the_scales_at_a_word() {
        for rows in [1usize, 2, 3, 4, 5, 64] {
            let cols = 7;
            let data: std::vec::Vec<u8> = (0..rows * cols).map(|i| (i * 37 + 200) as u8).collect();
            let tail = encode(rows, cols, rows, &data).unwrap();
            let mut side = std::vec![0x3cu8; rows * SCALE_BYTES];
            side.extend_from_slice(&tail);
            assert_eq!(Some(side.len()), side_len(DType::I8, rows, rows));
            assert_eq!(side.len() % ROW_SUM_BYTES, 0);
            let (scales, sums) = split(DType::I8, rows, &side);
            assert_eq!(scales.len(), rows * SCALE_BYTES);
            assert_eq!(sums.len(), rows * ROW_SUM_BYTES);
            for r in 0..rows {
                let want: i64 = data[r * cols..][..cols]
                    .iter()
                    .map(|&b| b as i8 as i64)
                    .sum();
                assert_eq!(at(sums, r).map(i64::from), Some(want), "{rows} {r}");
            }
            assert_eq!(at(sums, rows), None);
            // Scales alone: no sums; another dtype's side data is all scales.
            let (scales, sums) = split(DType::I8, rows, &side[..rows * SCALE_BYTES]);
            assert_eq!((scales.len(), sums.len()), (rows * SCALE_BYTES, 0));
            assert_eq!(split(DType::I4, rows, &side), (&side[..], &[][..]));
            assert_eq!(side_len(DType::I4, rows, rows), None);
        }
        assert_eq!(encode(2, 3, 2, &[0; 5]), None);
        assert_eq!(encode(1, 1 << 25, 1, &std::vec![0x7f; 1 << 25]), None);
        assert_eq!(encode(3, 0, 3, &[]), Some(std::vec![0; 2 + 12]));
    }
}
