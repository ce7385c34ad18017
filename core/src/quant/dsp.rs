//! The two Cortex-M DSP instructions the int8 kernels are built from, on packed 16-bit lanes:
//! `SXTB16` (bytes 0 and 2, or 1 and 3, of a word, each sign-extended into a 16-bit lane) and `SMLAD`
//! (`acc + lo(a) * lo(b) + hi(a) * hi(b)`, wrapping).
//!
//! With the feature `dsp` on an ARM target they are the instructions themselves (ARMv7E-M: Cortex-M4,
//! M7, M33 with DSP); everywhere else they are the same integer functions in plain Rust. LLVM forms
//! `SMLAD` only from pairs of `i16` loads and has no pattern for `SXTB16` at all, so from `i8` weights
//! in flash safe Rust cannot reach them: this module is the crate's only `unsafe`, three one-instruction
//! `asm!` blocks that touch no memory.
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

/// Four rows of bytes `stride` apart against 16-bit lanes: for `k` in 0..4,
/// `sums[k] + sum_g (lo(W) e_g.lo + hi(W) e_g.hi + lo(W') o_g.lo + hi(W') o_g.hi)` with `W`, `W'` the
/// even and odd signed bytes of the `g`-th word of row `k` (`rows[k * stride + 4g ..]`, little-endian)
/// and `(e_g, o_g) = (lanes[2g], lanes[2g + 1])`, over `g < lanes.len() / 2`, wrapping. Rows that end
/// early (beyond `rows`) stop every sum at that group.
///
/// With the feature `dsp` on an ARM target, when every row is whole, it is one loop of 24 instructions
/// per 16 multiply-accumulates (`LDRD` of the lanes, then per row `LDR`, two `SXTB16`, two `SMLAD`);
/// elsewhere the same sums in plain Rust.
#[inline(never)]
pub fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], sums: [i32; 4]) -> [i32; 4] {
    #[cfg(all(feature = "dsp", target_arch = "arm"))]
    {
        let groups = lanes.len() / 2;
        let whole = stride
            .checked_mul(3)
            .and_then(|s3| s3.checked_add(4 * groups))
            .is_some_and(|need| need <= rows.len());
        if groups > 0 && whole {
            let [mut a0, mut a1, mut a2, mut a3] = sums;
            let p0 = rows.as_ptr();
            // SAFETY: every load is in bounds and aligned as required: rows 0 to 3 start at
            // `p0 + k * stride` and the loop reads `4 * groups` bytes of each (`LDR` allows unaligned
            // words on ARMv7E-M), all within `rows` (checked above: `3 * stride + 4 * groups <=
            // rows.len()`); it reads `2 * groups` words of `lanes`, a `&[u32]` (word-aligned, as `LDRD`
            // needs). `groups > 0`, so the loop, which tests its end after each group, runs `groups`
            // times. It writes no memory but 8 bytes it pushes below `sp` and pops (the stack, hence no
            // `nostack`), and it changes the flags and the sticky Q flag, which no Rust code reads.
            unsafe {
                core::arch::asm!(
                    "str {t}, [sp, #-8]!",
                    "2:",
                    "ldrd {xe}, {xo}, [{xp}], #8",
                    "ldr.w {w}, [{p0}, {s}]",
                    "sxtb16 {t}, {w}",
                    "smlad {a1}, {t}, {xe}, {a1}",
                    "sxtb16 {w}, {w}, ror #8",
                    "smlad {a1}, {w}, {xo}, {a1}",
                    "ldr.w {w}, [{p0}, {s}, lsl #1]",
                    "sxtb16 {t}, {w}",
                    "smlad {a2}, {t}, {xe}, {a2}",
                    "sxtb16 {w}, {w}, ror #8",
                    "smlad {a2}, {w}, {xo}, {a2}",
                    "ldr {w}, [{p3}], #4",
                    "sxtb16 {t}, {w}",
                    "smlad {a3}, {t}, {xe}, {a3}",
                    "sxtb16 {w}, {w}, ror #8",
                    "smlad {a3}, {w}, {xo}, {a3}",
                    "ldr {w}, [{p0}], #4",
                    "sxtb16 {t}, {w}",
                    "smlad {a0}, {t}, {xe}, {a0}",
                    "sxtb16 {w}, {w}, ror #8",
                    "smlad {a0}, {w}, {xo}, {a0}",
                    "ldr {t}, [sp]",
                    "cmp {p0}, {t}",
                    "bne 2b",
                    "add sp, sp, #8",
                    p0 = inout(reg) p0 => _,
                    p3 = inout(reg) p0.wrapping_add(3 * stride) => _,
                    s = in(reg) stride,
                    xp = inout(reg) lanes.as_ptr() => _,
                    t = inout(reg) p0.wrapping_add(4 * groups) => _,
                    a0 = inout(reg) a0,
                    a1 = inout(reg) a1,
                    a2 = inout(reg) a2,
                    a3 = inout(reg) a3,
                    xe = out(reg) _,
                    xo = out(reg) _,
                    w = out(reg) _,
                    options(readonly),
                );
            }
            return [a0, a1, a2, a3];
        }
    }
    dot4_strided_portable(rows, stride, lanes, sums)
}

/// [`dot4_strided`] in plain Rust (out of line, so the `asm!` loop's callers keep small frames).
#[inline(never)]
fn dot4_strided_portable(rows: &[u8], stride: usize, lanes: &[u32], sums: [i32; 4]) -> [i32; 4] {
    let row = |k: usize| rows.get(k.saturating_mul(stride)..).unwrap_or(&[]);
    let pairs = lanes.chunks_exact(2).map(|p| (p[0], p[1]));
    super::int8::dot4_lanes([row(0), row(1), row(2), row(3)], pairs, sums)
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
