//! Asymmetric per-token quantisation of a vector that is mostly of one sign (the MLP's activated hidden
//! vector, after GELU or ReLU): it is centred on its mid-range `c = (max + min) / 2` before the
//! symmetric int8 rounding, so the int8 grid spans `[min, max]` rather than `[-max|x|, max|x|]` (half the
//! step for a ReLU output), and the matrix adds `c` times its row sums back:
//! `W x = W (x - c) + c * sum_j W[.][j]`, the row sums computed by the same integer kernel.

use crate::quant::int8;
use crate::weights::Matrix;

/// The mid-range `(max + min) / 2` of `x`; 0 for an empty slice or a non-finite result (NaNs ignored).
pub fn midrange(x: &[f32]) -> f32 {
    // The largest and the smallest in one pass; comparisons skip NaNs (the first of equal values kept).
    let (mut hi, mut lo) = (f32::NEG_INFINITY, f32::INFINITY);
    for &v in x {
        if v > hi {
            hi = v;
        }
        if v < lo {
            lo = v;
        }
    }
    let c = 0.5 * hi + 0.5 * lo;
    if c.is_finite() {
        c
    } else {
        0.0
    }
}

/// Subtracts the mid-range of `x` from every element and returns it.
pub fn centre(x: &mut [f32]) -> f32 {
    let c = midrange(x);
    x.iter_mut().for_each(|v| *v -= c);
    c
}

/// `x` as an integer matrix reads it, rounded to int8 and back in place (`q * s` with one scale
/// `s = max|x| / 127`), `centred` (the MLP's hidden vector) rounding `x - c` and adding back its
/// mid-range `c`, exactly as the forward pass rounds its inputs; `scratch` (at least `x.len()` bytes)
/// holds the integers. What the host's calibration and emulation of the device's roundings use.
#[cfg(any(feature = "encode", test))]
pub fn round_trip(x: &mut [f32], centred: bool, scratch: &mut [i8]) {
    let c = if centred { centre(x) } else { 0.0 };
    let q = super::activations::quantize(x, scratch);
    super::activations::dequantize(q.q, q.scale, x);
    x.iter_mut().for_each(|v| *v += c);
}

/// `out[r] += c * sum_j W[r][j]` for an integer matrix, the row sum taken as its own int8-input kernel
/// takes it ([`Matrix::dot_q`] against ones of scale `c`; an `i8` matrix's exact integer row sum, as
/// the blob stores it or summed now, rescaled the same way), using `scratch` (at least `W.cols()`
/// long) for the ones (and, where it holds `cols / 2` aligned words, for the four-row kernel's lanes
/// of ones).
pub fn add_row_sums(w: &Matrix<'_>, c: f32, scratch: &mut [i8], out: &mut [f32]) {
    // Whole rows only (a scratch shorter than a row sums that much of each, below).
    if scratch.len() >= w.cols() && w.add_stored_row_sums(c, out) {
        return;
    }
    let (cols, n) = (w.cols(), w.cols().min(scratch.len()));
    let whole_rows = n == cols;
    let (_, words, _) = bytemuck::pod_align_to_mut::<i8, u32>(scratch);
    let ones = match w.has_row_sums() {
        true => None,
        false => words.get_mut(..cols / 4 * 2).map(|ones| {
            ones.fill(0x0001_0001);
            &*ones
        }),
    };
    if whole_rows
        && w.each_row_sum_i8(ones, |r, acc| {
            if let Some(o) = out.get_mut(r) {
                *o += int8::rescale(acc, w.scale(r), c);
            }
        })
    {
        return;
    }
    let ones = &mut scratch[..n];
    ones.fill(1);
    for (r, o) in out.iter_mut().enumerate().take(w.rows()) {
        *o += match w.row_sum_i8(r, n) {
            Some(acc) => int8::rescale(acc, w.scale(r), c),
            None => w.dot_q(r, 0, ones, c),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn midrange_of_a_relu_output_and_of_bad_input() {
        assert_eq!(midrange(&[0.0, 3.0, 1.0, 0.5]), 1.5);
        assert_eq!(midrange(&[-0.17, 2.0]), 0.915);
        assert_eq!(midrange(&[]), 0.0);
        assert_eq!(midrange(&[1.0, f32::NAN, 3.0]), 2.0);
        assert_eq!(midrange(&[f32::INFINITY, 1.0]), 0.0);
        assert_eq!(midrange(&[f32::MAX, f32::MAX]), f32::MAX);
        let mut x = [0.0, 4.0, 1.0];
        assert_eq!(centre(&mut x), 2.0);
        assert_eq!(x, [-2.0, 2.0, -1.0]);
    }

    #[test]
    fn row_sums_are_the_kernels_sums_against_ones() {
        use crate::blob::{quads::from_row_major, DType};
        // Extreme bytes (the 16-bit lanes' worst case) over more than one batch of 128 words, and
        // mixed bytes; whole and partial quads, a tail of columns.
        for (rows, cols) in [(5, 1030), (9, 13), (4, 172), (3, 7)] {
            let fills: [fn(usize) -> u8; 3] = [|_| 0x80, |_| 0x7f, |i| (i * 73 + 9) as u8];
            for fill in fills {
                let data: std::vec::Vec<u8> = (0..rows * cols).map(fill).collect();
                let blob = from_row_major(rows, cols, &data);
                let scales: std::vec::Vec<u8> = (0..rows)
                    .flat_map(|r| crate::blob::encode_scale(0.5 + r as f32).unwrap())
                    .collect();
                let m = Matrix::from_parts(DType::I8, rows, cols, &blob, &scales).unwrap();
                let ones = std::vec![1i8; cols];
                for c in [0.37f32, -1.5] {
                    // Scratch for the ones alone, and for the kernel's lanes of ones.
                    for len in [cols, 3 * cols] {
                        let mut out = std::vec![0.25f32; rows];
                        add_row_sums(&m, c, &mut std::vec![0i8; len], &mut out);
                        for (r, o) in out.iter().enumerate() {
                            let want = 0.25 + m.dot_q(r, 0, &ones, c);
                            assert_eq!(o.to_bits(), want.to_bits(), "{rows}x{cols} {r}");
                            let exact: i64 = data[r * cols..][..cols]
                                .iter()
                                .map(|&b| b as i8 as i64)
                                .sum();
                            assert_eq!(m.row_sum_i8(r, cols), Some(exact));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn centring_halves_the_step_of_a_one_signed_vector() {
        let x: [f32; 8] = [0.0, 0.1, 0.7, 1.3, 2.0, 2.54, 0.02, 1.9];
        for (centred, step) in [(false, 2.54 / 127.0), (true, 1.27 / 127.0)] {
            let mut y = x;
            round_trip(&mut y, centred, &mut [0i8; 8]);
            for (a, b) in x.iter().zip(&y) {
                assert!((a - b).abs() <= 0.5 * step * 1.001, "{centred}: {a} -> {b}");
            }
        }
    }

    #[test]
    fn row_sums_are_the_dequantised_rows_summed() {
        use crate::blob::DType;
        // Two int8 rows of three with f16 scales 0.5 and 2.0 (0x3800, 0x4000); int4 rows use one group.
        let data = [1u8, 2, 0xfd, 0x7f, 0x81, 0x05];
        let scales = [0x00, 0x38, 0x00, 0x40];
        let w = Matrix::from_parts(DType::I8, 2, 3, &data, &scales).unwrap();
        let mut out = [10.0f32, 20.0];
        add_row_sums(&w, 0.25, &mut [0i8; 8], &mut out);
        assert_eq!(out, [10.0 + 0.25 * 0.5 * 0.0, 20.0 + 0.25 * 2.0 * 5.0]);
        let packed = [0x21u8, 0x0f, 0x77, 0x09];
        let w = Matrix::from_parts(DType::I4, 2, 3, &packed, &scales).unwrap();
        let mut out = [0.0f32; 2];
        add_row_sums(&w, 2.0, &mut [0i8; 3], &mut out);
        assert_eq!(
            out,
            [2.0 * 0.5 * (1.0 + 2.0 - 1.0), 2.0 * 2.0 * (7.0 + 7.0 - 7.0)]
        );
    }
}
