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

/// The quads kernel (`dot4_quads`) on the host: per quad of rows of an `I8` matrix in the blob's
/// layout, its groups' 16 bytes (four rows' words) times the group's four values repeated four times,
/// into 16 partial sums (a contiguous multiply-accumulate the CPU's SIMD takes whole), then each row's
/// four added: the device's exact wrapping sums.
#[inline(never)]
pub(crate) fn dot4_quads(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    let lane = |v: u32| v as u16 as i16 as i32;
    let groups = (lanes.len() / 2).min(cols / 4);
    let (mut small, mut large) = ([0i32; 4096], Vec::new());
    let x = if 16 * groups <= small.len() {
        &mut small[..16 * groups]
    } else {
        large.resize(16 * groups, 0);
        &mut large[..]
    };
    for (x, p) in x.chunks_exact_mut(16).zip(lanes.chunks_exact(2)) {
        let four = [lane(p[0]), lane(p[1]), lane(p[0] >> 16), lane(p[1] >> 16)];
        x.chunks_exact_mut(4).for_each(|x| x.copy_from_slice(&four));
    }
    quads_dispatch(w, cols, x, out)
}

fn quads_dispatch(w: &[u8], cols: usize, x: &[i32], out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just detected), the only requirement of `quads_avx2`.
        #[allow(unsafe_code)]
        unsafe {
            quads_avx2(w, cols, x, out)
        };
        return;
    }
    quads_rows(w, cols, x, out)
}

/// [`quads_rows`] with AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn quads_avx2(w: &[u8], cols: usize, x: &[i32], out: &mut [i32]) {
    quads_rows(w, cols, x, out)
}

#[inline(always)]
fn quads_rows(w: &[u8], cols: usize, x: &[i32], out: &mut [i32]) {
    for (q, sums) in out.chunks_exact_mut(4).enumerate() {
        let quad = w.get(q.saturating_mul(4 * cols)..).unwrap_or(&[]);
        // The quad's whole groups, as many as there are lanes.
        let n = (quad.len() / 16 * 16).min(x.len());
        let mut acc = [0i32; 16];
        for (w, x) in quad[..n].chunks_exact(16).zip(x.chunks_exact(16)) {
            for ((a, &w), &x) in acc.iter_mut().zip(w).zip(x) {
                *a = a.wrapping_add((w as i8 as i32) * x);
            }
        }
        for (s, acc) in sums.iter_mut().zip(acc.chunks_exact(4)) {
            *s = acc.iter().fold(0i32, |a, &v| a.wrapping_add(v));
        }
    }
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
