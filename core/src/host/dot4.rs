//! The four-row int8 kernel on the host: the device's exact integer sums (`SMLAD`'s, wrapping), in
//! the CPU's widest integer SIMD.

use std::vec::Vec;

/// The four-row int8 kernel (`dot4_strided`) on the host: `out[r] = sum_i rows[r * stride + i] *
/// x[i]` for whole quads of rows over the groups of four columns every row of the quad has, `x` given as
/// its sign-extended lane pairs. Integer sums (wrapping, as `SMLAD`; the callers keep them far from
/// overflow) are exact in any order: the same values as the device, summed by the CPU's widest SIMD.
#[inline(never)]
pub(crate) fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    let lane = |v: u32| v as u16 as i16 as i32;
    // The lanes as `i32` values, on the stack for the usual widths.
    let (mut small, mut large) = ([0i32; 1024], Vec::new());
    let len = lanes.len() / 2 * 4;
    let x = if len <= small.len() {
        &mut small[..len]
    } else {
        large.resize(len, 0);
        &mut large[..]
    };
    for (x, p) in x.chunks_exact_mut(4).zip(lanes.chunks_exact(2)) {
        x.copy_from_slice(&[lane(p[0]), lane(p[1]), lane(p[0] >> 16), lane(p[1] >> 16)]);
    }
    dot4_dispatch(rows, stride, x, out)
}

fn dot4_dispatch(rows: &[u8], stride: usize, x: &[i32], out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just detected), the only requirement of `dot4_avx2`.
        #[allow(unsafe_code)]
        unsafe {
            dot4_avx2(rows, stride, x, out)
        };
        return;
    }
    dot4_rows(rows, stride, x, out)
}

/// [`dot4_rows`] with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn dot4_avx2(rows: &[u8], stride: usize, x: &[i32], out: &mut [i32]) {
    dot4_rows(rows, stride, x, out)
}

#[inline(always)]
fn dot4_rows(rows: &[u8], stride: usize, x: &[i32], out: &mut [i32]) {
    for (q, sums) in out.chunks_exact_mut(4).enumerate() {
        let row = |k: usize| {
            let r = (4 * q + k).saturating_mul(stride);
            rows.get(r..).unwrap_or(&[])
        };
        // Whole words of every row of the quad, as many as there are lanes.
        let n = (0..4)
            .map(|k| row(k).len() / 4)
            .min()
            .unwrap_or(0)
            .min(x.len() / 4)
            * 4;
        let quad = [row(0), row(1), row(2), row(3)].map(|r| &r[..n]);
        // The four rows together, eight columns at a time into eight partial sums each, then the
        // columns left over (wrapping sums: exact in any order).
        let whole = n - n % 8;
        let mut acc = [[0i32; 8]; 4];
        for (c, x) in x[..whole].chunks_exact(8).enumerate() {
            for (acc, r) in acc.iter_mut().zip(&quad) {
                for ((a, &w), &x) in acc.iter_mut().zip(&r[8 * c..8 * c + 8]).zip(x) {
                    *a = a.wrapping_add((w as i8 as i32) * x);
                }
            }
        }
        for ((s, acc), r) in sums.iter_mut().zip(&acc).zip(&quad) {
            let part = acc.iter().fold(0i32, |a, &v| a.wrapping_add(v));
            *s = r[whole..]
                .iter()
                .zip(&x[whole..n])
                .fold(part, |a, (&w, &x)| a.wrapping_add((w as i8 as i32) * x));
        }
    }
}
