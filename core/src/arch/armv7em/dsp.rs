//! The DSP instructions the int8 kernels are built from, each one `asm!` block that touches no memory
//! (LLVM forms `SMLAD` only from pairs of `i16` loads and has no pattern for `SXTB16` at all, so from
//! `i8` weights in flash safe Rust cannot reach them). The same integer functions in plain Rust are
//! `portable/instructions.rs`.
#![allow(unsafe_code)]

/// Lanes `[b0, b2]` of `v`'s bytes `[b0, b1, b2, b3]`, each sign-extended to 16 bits (`SXTB16 v`).
#[inline(always)]
pub fn sxtb16(v: u32) -> u32 {
    let out: u32;
    // SAFETY: one register-to-register instruction of ARMv7E-M (the `dsp` feature asserts the core
    // has it): it reads `v`, writes `out`, and touches no memory, stack or flags.
    unsafe {
        core::arch::asm!("sxtb16 {0}, {1}", lateout(reg) out, in(reg) v,
            options(pure, nomem, nostack, preserves_flags));
    }
    out
}

/// Lanes `[b1, b3]` of `v`'s bytes, each sign-extended to 16 bits (`SXTB16 v, ROR #8`).
#[inline(always)]
pub fn sxtb16_ror8(v: u32) -> u32 {
    let out: u32;
    // SAFETY: as in `sxtb16`: one register-only instruction, no memory, stack or flags.
    unsafe {
        core::arch::asm!("sxtb16 {0}, {1}, ror #8", lateout(reg) out, in(reg) v,
            options(pure, nomem, nostack, preserves_flags));
    }
    out
}

/// `acc + lo(a) * lo(b) + hi(a) * hi(b)` on signed 16-bit lanes, wrapping (`SMLAD`; the kernels keep
/// their sums far from overflow).
#[inline(always)]
pub fn smlad(a: u32, b: u32, acc: i32) -> i32 {
    let out: i32;
    // SAFETY: one register-only instruction; it may set the sticky Q flag on overflow, which no Rust
    // code reads (hence no `preserves_flags`), and touches no memory or stack.
    unsafe {
        core::arch::asm!("smlad {0}, {1}, {2}, {3}", lateout(reg) out, in(reg) a, in(reg) b,
            in(reg) acc, options(pure, nomem, nostack));
    }
    out
}

/// `acc + lo(a) * lo(b) + hi(a) * hi(b)` on signed 16-bit lanes into a 64-bit sum, exact (`SMLALD`):
/// the int16 KV cache's sums.
#[inline(always)]
pub fn smlald(a: u32, b: u32, acc: i64) -> i64 {
    let (mut lo, mut hi) = (acc as u32, (acc >> 32) as u32);
    // SAFETY: one register-only instruction of ARMv7E-M: it reads `a`, `b` and the accumulator
    // pair, writes the pair, and touches no memory, stack or flags.
    unsafe {
        core::arch::asm!("smlald {0}, {1}, {2}, {3}", inout(reg) lo, inout(reg) hi, in(reg) a,
            in(reg) b, options(pure, nomem, nostack, preserves_flags));
    }
    ((hi as u64) << 32 | lo as u64) as i64
}
