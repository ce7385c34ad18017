//! The two Cortex-M DSP instructions the int8 kernels are built from, on packed 16-bit lanes:
//! `SXTB16` (bytes 0 and 2, or 1 and 3, of a word, each sign-extended into a 16-bit lane) and `SMLAD`
//! (`acc + lo(a) * lo(b) + hi(a) * hi(b)`, wrapping).
//!
//! With the feature `dsp` on an ARM target they are the instructions themselves (ARMv7E-M: Cortex-M4,
//! M7, M33 with DSP); everywhere else they are the same integer functions in plain Rust. LLVM forms
//! `SMLAD` only from pairs of `i16` loads and has no pattern for `SXTB16` at all, so from `i8` weights
//! in flash safe Rust cannot reach them: three one-instruction `asm!` blocks that touch no memory. The
//! four-row loop built from them is `dsp_kernel.rs`'s.
#![cfg_attr(feature = "dsp", allow(unsafe_code))]

/// Lanes `[b0, b2]` of `v`'s bytes `[b0, b1, b2, b3]`, each sign-extended to 16 bits (`SXTB16 v`).
#[inline(always)]
pub fn sxtb16(v: u32) -> u32 {
    #[cfg(all(feature = "dsp", target_arch = "arm"))]
    {
        let out: u32;
        // SAFETY: one register-to-register instruction of ARMv7E-M (the `dsp` feature asserts the core
        // has it): it reads `v`, writes `out`, and touches no memory, stack or flags.
        unsafe {
            core::arch::asm!("sxtb16 {0}, {1}", lateout(reg) out, in(reg) v,
                options(pure, nomem, nostack, preserves_flags));
        }
        out
    }
    #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
    {
        let lane = |b: u32| (b as u8 as i8 as i16 as u16) as u32;
        lane(v) | lane(v >> 16) << 16
    }
}

/// Lanes `[b1, b3]` of `v`'s bytes, each sign-extended to 16 bits (`SXTB16 v, ROR #8`).
#[inline(always)]
pub fn sxtb16_ror8(v: u32) -> u32 {
    #[cfg(all(feature = "dsp", target_arch = "arm"))]
    {
        let out: u32;
        // SAFETY: as in `sxtb16`: one register-only instruction, no memory, stack or flags.
        unsafe {
            core::arch::asm!("sxtb16 {0}, {1}, ror #8", lateout(reg) out, in(reg) v,
                options(pure, nomem, nostack, preserves_flags));
        }
        out
    }
    #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
    {
        sxtb16(v >> 8)
    }
}

/// `acc + lo(a) * lo(b) + hi(a) * hi(b)` on signed 16-bit lanes, wrapping (`SMLAD`; the kernels keep
/// their sums far from overflow).
#[inline(always)]
pub fn smlad(a: u32, b: u32, acc: i32) -> i32 {
    #[cfg(all(feature = "dsp", target_arch = "arm"))]
    {
        let out: i32;
        // SAFETY: one register-only instruction; it may set the sticky Q flag on overflow, which no Rust
        // code reads (hence no `preserves_flags`), and touches no memory or stack.
        unsafe {
            core::arch::asm!("smlad {0}, {1}, {2}, {3}", lateout(reg) out, in(reg) a, in(reg) b,
                in(reg) acc, options(pure, nomem, nostack));
        }
        out
    }
    #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
    {
        let (lo, hi) = (
            |v: u32| v as u16 as i16 as i32,
            |v: u32| (v >> 16) as u16 as i16 as i32,
        );
        acc.wrapping_add(lo(a) * lo(b)).wrapping_add(hi(a) * hi(b))
    }
}

/// `acc + lo(a) * lo(b) + hi(a) * hi(b)` on signed 16-bit lanes into a 64-bit sum, exact (`SMLALD`):
/// the int16 KV cache's sums.
#[inline(always)]
pub fn smlald(a: u32, b: u32, acc: i64) -> i64 {
    #[cfg(all(feature = "dsp", target_arch = "arm"))]
    {
        let (mut lo, mut hi) = (acc as u32, (acc >> 32) as u32);
        // SAFETY: one register-only instruction of ARMv7E-M: it reads `a`, `b` and the accumulator
        // pair, writes the pair, and touches no memory, stack or flags.
        unsafe {
            core::arch::asm!("smlald {0}, {1}, {2}, {3}", inout(reg) lo, inout(reg) hi, in(reg) a,
                in(reg) b, options(pure, nomem, nostack, preserves_flags));
        }
        ((hi as u64) << 32 | lo as u64) as i64
    }
    #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
    {
        let (lo, hi) = (
            |v: u32| v as u16 as i16 as i64,
            |v: u32| (v >> 16) as u16 as i16 as i64,
        );
        acc.wrapping_add(lo(a) * lo(b)).wrapping_add(hi(a) * hi(b))
    }
}

/// An exact `i64` sum as `f32`, rounded once to nearest even: through `i32` (one `VCVT`) where it
/// fits, the same value as the 64-bit conversion (a library call on 32-bit cores) gives.
#[inline(always)]
pub fn sum_to_f32(acc: i64) -> f32 {
    match i32::try_from(acc) {
        Ok(a) => a as f32,
        Err(_) => acc as f32,
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
    not(any(feature = "std", all(feature = "dsp", target_arch = "arm")))
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
    not(any(feature = "std", all(feature = "dsp", target_arch = "arm")))
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

/// The quads kernel (`dot4_quads`, whose sums it computes) in plain Rust: per quad of rows, its
/// groups' 16 bytes (the four rows' words) against the group's lanes (also the DSP loop's, for an
/// unaligned blob: its `LDMIA` needs words).
#[cfg(any(
    test,
    not(any(feature = "std", all(feature = "mve", target_arch = "arm")))
))]
#[cfg_attr(all(dsp_fpu, feature = "weights-i8"), allow(dead_code))] // there the rescaling entry takes every int8 matmul
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
    use super::*;

    #[test]
    fn lanes_are_sign_extended_bytes() {
        let v = u32::from_le_bytes([0x80, 0x7f, 0xff, 0x01]);
        assert_eq!(sxtb16(v), 0xffff_ff80);
        assert_eq!(sxtb16_ror8(v), 0x0001_007f);
        assert_eq!(smlad(0xffff_ff80, 0x0002_0003, 10), 10 - 128 * 3 - 2);
    }
}
