//! The four-row int8 kernels that the matmuls, the attention scores and the value mix spend most of
//! their time in: [`dot4_quads`] for an `I8` matrix in the blob's quads of rows (the matmuls),
//! [`dot4_strided`] for rows any stride apart (the KV cache's scores and mix). One entry each, the
//! target's implementation behind it (`crate::arch`: Helium, the DSP instructions' loops, the host's
//! SIMD, or plain Rust). Every one
//! computes the same wrapping integer sums, so the same bits.

use crate::arch::{dot4_quads as quads_kernel, dot4_strided as kernel};

/// Rows of bytes `stride` apart against 16-bit lanes, four rows at a time: for every row `r <
/// out.len()`, rounded down to a multiple of 4, `out[r] = sum_g (lo(W) e_g.lo + hi(W) e_g.hi + lo(W')
/// o_g.lo + hi(W') o_g.hi)` with `W`, `W'` the even and odd signed bytes of the `g`-th word of row `r`
/// (`rows[r * stride + 4g ..]`, little-endian) and `(e_g, o_g) = (lanes[2g], lanes[2g + 1])`, over `g <
/// lanes.len() / 2`, wrapping. Rows that end early (beyond `rows`) stop their quad's sums at that group.
#[inline(always)]
pub(crate) fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    kernel(rows, stride, lanes, out)
}

/// An `I8` matrix of `cols` columns in the blob's quads of rows ([`crate::blob::quads`]) against
/// 16-bit lanes: for every quad `q < out.len() / 4` (its bytes from `q * 4 * cols`, group `g`'s 16
/// bytes at `16 g`, row `k`'s word at `4 k` of them), `out[4q + k] = sum_g (lo(W) e_g.lo + hi(W)
/// e_g.hi + lo(W') o_g.lo + hi(W') o_g.hi)` over `g < min(lanes.len() / 2, cols / 4)`, with `W`, `W'` the
/// even and odd signed bytes of row `k`'s word of group `g` and `(e_g, o_g) = (lanes[2g], lanes[2g +
/// 1])`, wrapping. A quad that ends early (beyond `w`) stops its sums at its last whole group.
#[inline(always)]
pub(crate) fn dot4_quads(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    quads_kernel(w, cols, lanes, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::lcg;
    use std::{vec, vec::Vec};

    use crate::arch::Dot4 as Kernel;

    /// The dispatched quads kernel and every other one this target compiles.
    fn quads_kernels() -> Vec<Kernel> {
        let mut all: Vec<Kernel> = vec![dot4_quads];
        all.extend(crate::arch::other_dot4_quads());
        all
    }

    /// `x`'s 16-bit lanes as the kernels take them: per group `[x0, x2]`, `[x1, x3]`.
    fn lanes_of(x: &[i32]) -> Vec<u32> {
        x.chunks_exact(4)
            .flat_map(|c| {
                let pack = |a: i32, b: i32| (a as u16 as u32) | ((b as u16 as u32) << 16);
                [pack(c[0], c[2]), pack(c[1], c[3])]
            })
            .collect()
    }

    #[test]
    fn every_quads_kernel_has_the_sums_of_one_row_at_a_time() {
        use crate::blob::quads::from_row_major;
        let mut next = lcg(5);
        // Ragged: odd rows and columns, fewer lanes than columns, a truncated matrix.
        for (rows, cols, used, cut) in [
            (4, 64, 64, 0),
            (8, 36, 36, 0),
            (12, 13, 12, 0),
            (4, 4, 4, 0),
            (9, 200, 200, 0),
            (7, 22, 8, 0),
            (16, 40, 40, 0),
            (8, 36, 36, 50),
            (8, 64, 32, 3),
        ] {
            let row_major: Vec<u8> = (0..rows * cols).map(|_| next() as u8).collect();
            let blob = from_row_major(rows, cols, &row_major);
            let w = &blob[..blob.len() - cut];
            let x: Vec<i32> = (0..used).map(|_| next() as i16 as i32).collect();
            let lanes = lanes_of(&x);
            let n = used / 4 * 4;
            for (k, kernel) in quads_kernels().into_iter().enumerate() {
                let mut got = vec![7i32; rows + 1];
                kernel(w, cols, &lanes, &mut got[..rows]);
                for (r, g) in got.iter().enumerate() {
                    let quad_end = (r / 4 + 1) * 4 * cols;
                    // A cut quad: the groups whose 16 bytes are all within `w`.
                    let groups = match quad_end > w.len() {
                        true => (w.len().saturating_sub(r / 4 * 4 * cols) / 16).min(n / 4),
                        false => n / 4,
                    };
                    let want = match r < rows / 4 * 4 {
                        true => row_major[r * cols..r * cols + 4 * groups]
                            .iter()
                            .zip(&x)
                            .fold(0i32, |a, (&w, &x)| a.wrapping_add((w as i8 as i32) * x)),
                        false => 7,
                    };
                    assert_eq!(
                        *g, want,
                        "kernel {k}: {rows} x {cols} ({used} used) row {r}"
                    );
                }
            }
        }
    }

    /// The dispatched kernel and every other one this target compiles.
    fn kernels() -> Vec<Kernel> {
        let mut all: Vec<Kernel> = vec![dot4_strided];
        all.extend(crate::arch::other_dot4_strided());
        all
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
