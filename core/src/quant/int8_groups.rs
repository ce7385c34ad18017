//! The `i8g` matrix-vector kernel: int8 rows (row-major) in groups of [`I8_GROUP`] columns, each group
//! with its own scale, against int8 or int16 activations. Per group two words of weights meet four
//! words of activation lanes in four `SMLAD`s ([`mac_lanes`]), the sum exact in `i32`; then
//! `total += sum_g * s_g` in order in `f32`, and `out[r] = total * s_x`: for each row what
//! `Matrix::dot_q` (int8) or `Matrix::dot_wide` (int16) gives, bit for bit. On cores with the DSP
//! instructions and an FPU the rows go two at a time through the same sums in assembly
//! (`arch/armv7em/groups.rs`), the row it leaves (an odd last one) through this loop.

use super::groups;
use super::quantized::Quantized;
use crate::arch::mac_lanes;
use crate::blob::{decode_finite_scale, I8_GROUP, SCALE_BYTES};

/// `out[r] = (sum_g acc_g * s_w[r][g]) * s_x` for the rows of an `i8g` matrix of `cols` columns (whole
/// groups) against `x`: int8 with its [`Quantized::lanes`], or int16 ([`Quantized::wide`], whose
/// values lie in the same lane order). Returns the rows done: all of `out` the matrix holds, or 0
/// (nothing done) when the columns are not whole groups, `x` has no lanes for every column, or the
/// bytes are not aligned little-endian words; the caller then goes row by row.
pub(crate) fn matvec(
    data: &[u8],
    cols: usize,
    scales: &[u8],
    x: &Quantized<'_>,
    out: &mut [f32],
) -> usize {
    let lanes: &[u32] = match x.wide.is_empty() {
        true => x.lanes,
        false => bytemuck::try_cast_slice(x.wide.0).unwrap_or(&[]),
    };
    let Some(words) = groups::kernel_words(data, cols, I8_GROUP, lanes.len()) else {
        return 0;
    };
    let (row_words, row_scales) = (cols / 4, cols / I8_GROUP * SCALE_BYTES);
    let rows = out
        .len()
        .min(words.len() / row_words)
        .min(scales.len() / row_scales);
    // On cores with the DSP instructions and an FPU the rows in pairs in assembly, the same bits.
    let done = crate::arch::i8g_rows2(words, cols, scales, lanes, x.scale, &mut out[..rows]);
    let rows_of = words
        .chunks_exact(row_words)
        .zip(scales.chunks_exact(row_scales))
        .skip(done);
    for (o, (w, s)) in out[done..rows].iter_mut().zip(rows_of) {
        let mut total = 0.0f32;
        let groups = w.chunks_exact(2).zip(lanes.chunks_exact(4));
        for ((w, l), s) in groups.zip(s.chunks_exact(SCALE_BYTES)) {
            let acc = mac_lanes(mac_lanes(0, w[0], (l[0], l[1])), w[1], (l[2], l[3]));
            total += acc as f32 * decode_finite_scale(s);
        }
        *o = total * x.scale;
    }
    rows
}
