//! The int8 and int16 lanes' kernels built on the DSP instructions (the target's, through the
//! facade): the exact int16 dot product ([`dot_lanes16`]) and its conversion ([`sum_to_f32`]), the
//! lanes' packing ([`word`], [`lane_word`], [`mac_lanes`]), and the four-row int8 kernels in plain
//! Rust ([`dot4_strided_portable`], [`dot4_quads_portable`]) for targets without their own.

use crate::arch::{smlad, smlald, sxtb16, sxtb16_ror8};

/// `sum_k lo(a_k) lo(b_k) + hi(a_k) hi(b_k)` over the words of `a` and `b` (as far as both go), exact
/// in `i64`: [`smlald`] four words per pass, then the rest.
#[inline(always)]
pub fn dot_lanes16(a: &[u32], b: &[u32]) -> i64 {
    let n = a.len().min(b.len());
    let (a4, b4) = (a[..n].chunks_exact(4), b[..n].chunks_exact(4));
    let rest = a4.remainder().iter().zip(b4.remainder());
    let mut acc = 0i64;
    for (a, b) in a4.zip(b4) {
        acc = smlald(
            a[3],
            b[3],
            smlald(a[2], b[2], smlald(a[1], b[1], smlald(a[0], b[0], acc))),
        );
    }
    rest.fold(acc, |acc, (&a, &b)| smlald(a, b, acc))
}

/// `out[i] = sum_to_f32(dot(rows[i * stride..], v))` for the first `4 g` outputs, `g` the most
/// quads of rows `rows` holds whole (`(4 g - 1) * stride + v.len()` words) and `out` has room for,
/// returning `4 g`; each `dot` the exact sum [`dot_lanes16`] gives over the `v.len()` words of `v`:
/// four keys or four outputs of the int16 KV cache per pass over the query's or the weights' words.
/// On cores with the DSP instructions and an FPU, assembly sharing each load of `v` between the four
/// rows (`armv7em/lanes16.rs`: 2.6 instructions per word and row, 5 to convert a sum below `2^31`);
/// elsewhere [`dot_lanes16`] and [`sum_to_f32`] per row.
#[inline]
pub fn sums4_f32(rows: &[u32], stride: usize, v: &[u32], out: &mut [f32]) -> usize {
    // Quad `g` needs `4 g stride + 3 stride + v.len()` words.
    let first = stride.saturating_mul(3).saturating_add(v.len());
    let fit = match rows.len().checked_sub(first) {
        Some(_) if stride == 0 => usize::MAX,
        Some(spare) => spare / stride.saturating_mul(4) + 1,
        None => 0,
    };
    let quads = fit.min(out.len() / 4);
    // (The assembly's bound: sums below `2^62`.)
    if quads == 0 || v.len() >= 1 << 29 {
        return 0;
    }
    if !crate::arch::sums4_lanes16(rows, stride, v, out, quads) {
        return 0;
    }
    4 * quads
}

/// The portable [`crate::arch::sums4_lanes16`]: [`dot_lanes16`] and [`sum_to_f32`] per row of the
/// first `quads` quads (their rows whole, `quads <= out.len() / 4`: `sums4_f32` checked), `true`.
#[inline(always)]
pub(crate) fn sums4_lanes16(
    rows: &[u32],
    stride: usize,
    v: &[u32],
    out: &mut [f32],
    quads: usize,
) -> bool {
    for (i, o) in out[..4 * quads].iter_mut().enumerate() {
        *o = sum_to_f32(dot_lanes16(&rows[i * stride..], v));
    }
    true
}

/// An exact `i64` sum as `f32`, rounded once to nearest even, the value `acc as f32` gives (a library
/// call on 32-bit cores), through `i32` (one `VCVT`): as it is where it fits, else its top 31 bits
/// with the bits shifted out folded into the lowest ("round to odd", exact for a later rounding to
/// 24 bits), converted, and scaled back by `2^shift` (exact).
#[inline(always)]
pub fn sum_to_f32(acc: i64) -> f32 {
    if let Ok(a) = i32::try_from(acc) {
        return a as f32;
    }
    let m = acc.unsigned_abs();
    // `m >= 2^31`, so 1 <= shift <= 33 and the kept bits are below 2^31.
    let shift = 33 - m.leading_zeros();
    let kept = (m >> shift) as u32 | u32::from(m & ((1u64 << shift) - 1) != 0);
    let f = kept as i32 as f32 * f32::from_bits((127 + shift) << 23);
    if acc < 0 {
        -f
    } else {
        f
    }
}

/// Four bytes as one little-endian word.
#[inline(always)]
pub(crate) fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Two values as the 16-bit lanes of one word, `low` in bits 0-15 and `high` in bits 16-31 (each
/// truncated to 16 bits: the lanes `SMLAD` multiplies).
#[inline(always)]
pub(crate) fn lane_word(low: i32, high: i32) -> u32 {
    (low as u16 as u32) | (high as u16 as u32) << 16
}

/// `acc + lo(W) e.lo + hi(W) e.hi + lo(W') o.lo + hi(W') o.hi`, `W` and `W'` the even and odd signed
/// bytes of `w` as 16-bit lanes (`SXTB16`): bytes 0 to 3 of `w` times lanes `e.lo, o.lo, e.hi, o.hi`.
#[inline(always)]
pub(crate) fn mac_lanes(acc: i32, w: u32, (e, o): (u32, u32)) -> i32 {
    smlad(sxtb16_ror8(w), o, smlad(sxtb16(w), e, acc))
}

/// `sums[r] + sum_g (lo(W_g) e_g.lo + hi(W_g) e_g.hi + lo(W'_g) o_g.lo + hi(W'_g) o_g.hi)` for four
/// rows of bytes, where `W_g` and `W'_g` are the even and odd bytes of a row's `g`-th word as 16-bit
/// lanes (`SXTB16`) and `(e_g, o_g)` the `g`-th item of `lanes`, over whole words of the rows: the
/// portable four-row kernel.
#[cfg(any(
    test,
    microlens_arch = "portable",
    microlens_arch = "armv7m",
    microlens_arch = "armv6m",
    microlens_arch = "rv32im"
))]
#[inline(always)]
pub(crate) fn dot4_lanes(
    rows: [&[u8]; 4],
    lanes: impl Iterator<Item = (u32, u32)>,
    mut sums: [i32; 4],
) -> [i32; 4] {
    let [a, b, c, d] = rows.map(|r| r.chunks_exact(4));
    for ((((a, b), c), d), x) in a.zip(b).zip(c).zip(d).zip(lanes) {
        for (s, r) in sums.iter_mut().zip([a, b, c, d]) {
            *s = mac_lanes(*s, word(r), x);
        }
    }
    sums
}

/// The four-row kernel (`dot4_strided`, whose sums it computes) in plain Rust, one quad of rows at a
/// time (out of line, so its callers keep small frames).
#[cfg(any(
    test,
    microlens_arch = "portable",
    microlens_arch = "armv7m",
    microlens_arch = "armv6m",
    microlens_arch = "rv32im"
))]
#[inline(never)]
pub(crate) fn dot4_strided_portable(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    for (q, sums) in out.chunks_exact_mut(4).enumerate() {
        let row = |k: usize| {
            let r = (4 * q + k).saturating_mul(stride);
            rows.get(r..).unwrap_or(&[])
        };
        let pairs = lanes.chunks_exact(2).map(|p| (p[0], p[1]));
        let quad = dot4_lanes([row(0), row(1), row(2), row(3)], pairs, [0; 4]);
        sums.copy_from_slice(&quad);
    }
}

/// `dot4_quads` for a target whose assembly sums one whole quad: `quad_sums(quad, lanes, groups)` gives
/// a quad's four sums over `groups` groups, or `None` where it cannot (a quad or lanes short of them),
/// and there [`dot4_quads_portable`] takes the quad.
#[cfg(any(
    microlens_arch = "armv7m",
    microlens_arch = "armv6m",
    microlens_arch = "rv32im"
))]
#[inline(always)]
pub(crate) fn dot4_quads_by(
    w: &[u8],
    cols: usize,
    lanes: &[u32],
    out: &mut [i32],
    quad_sums: impl Fn(&[u8], &[u32], usize) -> Option<[i32; 4]>,
) {
    let groups = (lanes.len() / 2).min(cols / 4);
    for (sums, quad) in out
        .chunks_exact_mut(4)
        .zip(crate::blob::quads::quads_of(w, cols))
    {
        match quad_sums(quad, lanes, groups) {
            Some(s) => sums.copy_from_slice(&s),
            // A quad short of its groups (no blob has one) or none to sum: the portable loop.
            None => dot4_quads_portable(quad, cols, lanes, sums),
        }
    }
}

/// The quads kernel (`dot4_quads`, whose sums it computes) in plain Rust: per quad of rows, its
/// groups' 16 bytes (the four rows' words) against the group's lanes (also the DSP loop's, for an
/// unaligned blob: its `LDMIA` needs words).
#[cfg(any(
    test,
    microlens_arch = "portable",
    microlens_arch = "armv7em",
    microlens_arch = "armv7m",
    microlens_arch = "armv6m",
    microlens_arch = "rv32im"
))]
#[cfg_attr(
    all(microlens_arch = "armv7em", feature = "weights-i8"),
    allow(dead_code)
)] // there the rescaling entry takes every int8 matmul
#[inline(never)]
pub(crate) fn dot4_quads_portable(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    let groups = (lanes.len() / 2).min(cols / 4);
    for (sums, quad) in out
        .chunks_exact_mut(4)
        .zip(crate::blob::quads::quads_of(w, cols))
    {
        let mut acc = [0i32; 4];
        for (g, x) in quad
            .chunks_exact(16)
            .take(groups)
            .zip(lanes.chunks_exact(2))
        {
            for (a, w) in acc.iter_mut().zip(g.chunks_exact(4)) {
                *a = mac_lanes(*a, word(w), (x[0], x[1]));
            }
        }
        sums.copy_from_slice(&acc);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sums_convert_as_the_64_bit_conversion_does() {
        let mut next = crate::testing::lcg(0x64f3_2a17);
        let mut cases: std::vec::Vec<i64> = (0..200_000)
            .map(|i| {
                let v = (next() as i64) << 32 | next() as i64;
                v >> (i % 40)
            })
            .collect();
        for k in 30..63 {
            let p = 1i64 << k;
            // Powers of two, their neighbours and the ties of every width.
            for d in [
                -1i64,
                0,
                1,
                p >> 24,
                (p >> 24) - 1,
                (p >> 24) + 1,
                3 * (p >> 25),
            ] {
                cases.extend([p + d, -(p + d), p - d]);
            }
        }
        cases.extend([i64::MIN, i64::MAX, i64::MIN + 1, 0, -1, i32::MIN as i64 - 1]);
        for v in cases {
            assert_eq!(super::sum_to_f32(v).to_bits(), (v as f32).to_bits(), "{v}");
        }
    }

    use crate::arch::{smlad, sxtb16, sxtb16_ror8};

    #[test]
    fn lanes_are_sign_extended_bytes() {
        let v = u32::from_le_bytes([0x80, 0x7f, 0xff, 0x01]);
        assert_eq!(sxtb16(v), 0xffff_ff80);
        assert_eq!(sxtb16_ror8(v), 0x0001_007f);
        assert_eq!(smlad(0xffff_ff80, 0x0002_0003, 10), 10 - 128 * 3 - 2);
    }
}
