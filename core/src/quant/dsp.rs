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
