//! The four-row int8 kernels on the host: the device's exact integer sums (`SMLAD`'s, wrapping), in
//! the CPU's widest integer SIMD (for the quads of an `I8` matrix, AVX2's intrinsics: the compiler's
//! own vectorisation of that loop was three times slower than the strided one's).
#![allow(unsafe_code)]

use std::vec::Vec;

/// The four-row int8 kernel (`dot4_strided`) on the host: `out[r] = sum_i rows[r * stride + i] *
/// x[i]` for whole quads of rows over the groups of four columns every row of the quad has, `x` given as
/// its sign-extended lane pairs. Integer sums (wrapping, as `SMLAD`; the callers keep them far from
/// overflow) are exact in any order: the same values as the device, summed by the CPU's widest SIMD.
#[inline(never)]
pub(crate) fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    let (mut small, mut large) = ([0i32; 1024], Vec::new());
    let x = values(lanes, 1, &mut small, &mut large);
    dot4_dispatch(rows, stride, x, out)
}

/// The columns' values of `lanes` (per group `[x0, x2]`, `[x1, x3]`) as `i32`s, per group `x0, x1,
/// x2, x3` written `copies` times in a row: in `small` when they fit, else in `large`.
fn values<'b>(
    lanes: &[u32],
    copies: usize,
    small: &'b mut [i32; 1024],
    large: &'b mut Vec<i32>,
) -> &'b [i32] {
    let lane = |v: u32| v as u16 as i16 as i32;
    let len = lanes.len() / 2 * 4 * copies;
    let x = if len <= small.len() {
        &mut small[..len]
    } else {
        large.resize(len, 0);
        &mut large[..]
    };
    for (x, p) in x.chunks_exact_mut(4 * copies).zip(lanes.chunks_exact(2)) {
        let four = [lane(p[0]), lane(p[1]), lane(p[0] >> 16), lane(p[1] >> 16)];
        x.chunks_exact_mut(4).for_each(|x| x.copy_from_slice(&four));
    }
    x
}

/// The quads kernel (`dot4_quads`) on the host: per quad of rows of an `I8` matrix in the blob's
/// layout, its groups' 16 bytes (four rows' words: rows 0-1 and 2-3 eight bytes each) times the
/// group's four values twice, into 16 partial sums, then each row's four added: the device's exact
/// wrapping sums.
#[inline(never)]
pub(crate) fn dot4_quads(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    let (mut small, mut large) = ([0i32; 1024], Vec::new());
    let groups = (lanes.len() / 2).min(cols / 4);
    let x = values(&lanes[..2 * groups], 2, &mut small, &mut large);
    quads_dispatch(w, cols, x, out)
}

fn quads_dispatch(w: &[u8], cols: usize, x: &[i32], out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just detected), the only requirement of `quads_avx2`.
        unsafe { quads_avx2(w, cols, x, out) };
        return;
    }
    quads_rows(w, cols, x, out)
}

/// [`quads_rows`] with AVX2's intrinsics: per group one 16-byte load, rows 0-1 and 2-3 sign-extended
/// to eight `i32` each (`VPMOVSXBD`), times the group's four values twice, added to two sums.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn quads_avx2(w: &[u8], cols: usize, x: &[i32], out: &mut [i32]) {
    use std::arch::x86_64::*;
    for (sums, quad) in out
        .chunks_exact_mut(4)
        .zip(crate::blob::quads::quads_of(w, cols))
    {
        let groups = (quad.len() / 16).min(x.len() / 8);
        let (mut a0, mut a1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for (w, x) in quad[..16 * groups].chunks_exact(16).zip(x.chunks_exact(8)) {
            // SAFETY: `w` holds 16 bytes and `x` 8 `i32`s (`chunks_exact`); unaligned loads.
            let (wv, xv) = unsafe {
                (
                    _mm_loadu_si128(w.as_ptr().cast()),
                    _mm256_loadu_si256(x.as_ptr().cast()),
                )
            };
            let (lo, hi) = (
                _mm256_cvtepi8_epi32(wv),
                _mm256_cvtepi8_epi32(_mm_unpackhi_epi64(wv, wv)),
            );
            a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(lo, xv));
            a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(hi, xv));
        }
        let mut acc = [0i32; 16];
        // SAFETY: `acc` holds 16 `i32`s, two unaligned 32-byte stores.
        unsafe {
            _mm256_storeu_si256(acc.as_mut_ptr().cast(), a0);
            _mm256_storeu_si256(acc.as_mut_ptr().add(8).cast(), a1);
        }
        for (s, acc) in sums.iter_mut().zip(acc.chunks_exact(4)) {
            *s = acc.iter().fold(0i32, |a, &v| a.wrapping_add(v));
        }
    }
}

/// The quads kernel in plain Rust over `x` (per group its four values twice): the path of a CPU
/// without AVX2.
#[inline(always)]
fn quads_rows(w: &[u8], cols: usize, x: &[i32], out: &mut [i32]) {
    for (sums, quad) in out
        .chunks_exact_mut(4)
        .zip(crate::blob::quads::quads_of(w, cols))
    {
        // The quad's whole groups, as many as there are values (eight per group: its four twice).
        let groups = (quad.len() / 16).min(x.len() / 8);
        // Per group, rows 0 and 1 (eight bytes) and rows 2 and 3 against the group's values twice:
        // eight partial sums each (wrapping: exact in any order).
        let mut acc = [[0i32; 8]; 2];
        let quad = &quad[..16 * groups];
        for (g, x) in x[..8 * groups].chunks_exact(8).enumerate() {
            for (h, acc) in acc.iter_mut().enumerate() {
                let w = &quad[16 * g + 8 * h..16 * g + 8 * h + 8];
                for ((a, &w), &x) in acc.iter_mut().zip(w).zip(x) {
                    *a = a.wrapping_add((w as i8 as i32) * x);
                }
            }
        }
        let rows = acc.iter().flat_map(|a| a.chunks_exact(4));
        for (s, acc) in sums.iter_mut().zip(rows) {
            *s = acc.iter().fold(0i32, |a, &v| a.wrapping_add(v));
        }
    }
}

fn dot4_dispatch(rows: &[u8], stride: usize, x: &[i32], out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just detected), the only requirement of `dot4_avx2`.
        unsafe { dot4_avx2(rows, stride, x, out) };
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

/// [`dot4_quads`] on [`quads_rows`], the path of a CPU without AVX2 (for the tests on any CPU).
#[cfg(test)]
pub(crate) fn dot4_quads_plain(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    let (mut small, mut large) = ([0i32; 1024], Vec::new());
    let groups = (lanes.len() / 2).min(cols / 4);
    quads_rows(
        w,
        cols,
        values(&lanes[..2 * groups], 2, &mut small, &mut large),
        out,
    )
}
