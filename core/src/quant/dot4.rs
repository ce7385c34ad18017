//! The four-row int8 kernel, [`dot4_strided`], that the matmuls, the attention scores and the value
//! mix spend most of their time in: one entry, the target's implementation behind it (Helium in
//! `mve.rs`, the DSP instructions' loop in `dsp_kernel.rs`, the host's SIMD in `host/dot4.rs`, plain
//! Rust in `dsp.rs` elsewhere). Every one computes the same wrapping integer sums, so the same bits.

#[cfg(not(any(feature = "std", all(feature = "dsp", target_arch = "arm"))))]
use super::dsp::dot4_strided_portable as kernel;
#[cfg(all(feature = "dsp", not(feature = "mve"), target_arch = "arm"))]
use super::dsp_kernel::dot4_strided as kernel;
#[cfg(all(feature = "mve", target_arch = "arm"))]
use super::mve::dot4_strided as kernel;
#[cfg(all(feature = "std", not(all(feature = "dsp", target_arch = "arm"))))]
use crate::host::dot4::dot4_strided as kernel;

/// Rows of bytes `stride` apart against 16-bit lanes, four rows at a time: for every row `r <
/// out.len()`, rounded down to a multiple of 4, `out[r] = sum_g (lo(W) e_g.lo + hi(W) e_g.hi + lo(W')
/// o_g.lo + hi(W') o_g.hi)` with `W`, `W'` the even and odd signed bytes of the `g`-th word of row `r`
/// (`rows[r * stride + 4g ..]`, little-endian) and `(e_g, o_g) = (lanes[2g], lanes[2g + 1])`, over `g <
/// lanes.len() / 2`, wrapping. Rows that end early (beyond `rows`) stop their quad's sums at that group.
#[inline(always)]
pub(crate) fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    kernel(rows, stride, lanes, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::lcg;
    use std::{vec, vec::Vec};

    /// The four-row kernel's signature.
    type Kernel = fn(&[u8], usize, &[u32], &mut [i32]);

    /// The dispatched kernel and every other one this target compiles.
    fn kernels() -> Vec<Kernel> {
        #[cfg(feature = "std")]
        let host: Option<Kernel> = Some(crate::host::dot4::dot4_strided);
        #[cfg(not(feature = "std"))]
        let host = None;
        let portable = crate::quant::dsp::dot4_strided_portable;
        [dot4_strided, portable].into_iter().chain(host).collect()
    }

    #[test]
    fn every_kernel_has_the_sums_of_one_row_at_a_time() {
        let mut next = lcg(3);
        for (rows_n, cols, stride) in [
            (4, 64, 64),
            (8, 36, 40),
            (12, 13, 13),
            (4, 4, 4),
            (8, 200, 200),
        ] {
            let rows: Vec<u8> = (0..rows_n * stride).map(|_| next() as u8).collect();
            let x: Vec<i32> = (0..cols / 4 * 4).map(|_| next() as i16 as i32).collect();
            let lanes: Vec<u32> = x
                .chunks_exact(4)
                .flat_map(|c| {
                    let pack = |a: i32, b: i32| (a as u16 as u32) | ((b as u16 as u32) << 16);
                    [pack(c[0], c[2]), pack(c[1], c[3])]
                })
                .collect();
            let n = cols / 4 * 4;
            for (k, kernel) in kernels().into_iter().enumerate() {
                let mut got = vec![0i32; rows_n];
                kernel(&rows, stride, &lanes, &mut got);
                for (r, g) in got.iter().enumerate() {
                    let want = rows[r * stride..r * stride + n]
                        .iter()
                        .zip(&x)
                        .fold(0i32, |a, (&w, &x)| a.wrapping_add((w as i8 as i32) * x));
                    assert_eq!(*g, want, "kernel {k}: {rows_n} x {cols} row {r}");
                }
            }
        }
    }
}
