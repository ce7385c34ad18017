//! The softmax's first half ([`super::softmax::exp_shifted`]) in assembly for cores with an FPU and
//! the DSP instructions (Cortex-M4F, M7, M33): [`super::exp::exp`]'s operations in its order, each
//! constant in a register for the whole run, 29 instructions per score where the compiler's loop took
//! 32 (per score `VLDR`, `VSUB`, the rounding (`VMOV`, `VMLA`), the range test on `k` (`VMOV`, `ADD`,
//! `CMP`, `BHI`), `k` as a float, two `VMLS` for `r`, the polynomial (four `VMOV`/`VMLA` pairs, `VMUL`,
//! `VMLA`, `VADD`), the exponent (`VMOV`, `ADD ... LSL #23`, `VMOV`), `VSTMIA`, the sum, the loop).
//! A score whose `k` is out of the fast path's range ends the run: the caller computes it with
//! [`super::exp::exp`] and starts the next run after it.
//!
//! One function in `global_asm!` with the C calling convention: it clobbers FPU `s0`-`s15` and the
//! general registers its callers save (r4 saved itself).
#![allow(unsafe_code)]

/// `x_i <- e^(x_i - max)` from the start of `x` while `e^(x_i - max)` takes [`super::exp::exp`]'s fast
/// path, each added to `sum` in order; returns how many were done (the next one, if any, takes the
/// slow path).
#[inline]
pub(crate) fn run(x: &mut [f32], max: f32, sum: &mut f32) -> usize {
    let consts = &super::exp::LOOP_CONSTANTS;
    // SAFETY: `x` holds `x.len()` word-aligned writable words, `consts` ten readable words, `sum` one
    // writable word.
    let left = unsafe { microlens_exp_shifted(x.as_mut_ptr(), x.len(), consts.as_ptr(), sum, max) };
    x.len() - left
}

extern "C" {
    /// Safety: `x` points to `n` word-aligned writable words, `consts` to the ten words of
    /// [`super::exp::LOOP_CONSTANTS`], `sum` to a writable word. Returns the scores left (the first
    /// of them not done).
    fn microlens_exp_shifted(
        x: *mut f32,
        n: usize,
        consts: *const f32,
        sum: *mut f32,
        max: f32,
    ) -> usize;
}

// Registers: r0 the scores, r1 those left, r2 `t`'s bits (`k` plus `ROUND`'s bits), r3 `sum`'s
// address, r4 `K_MIN`'s offset from `ROUND`'s bits, r12 scratch; s0 `max`, s1 the sum, s2 `x` then `r`
// then `e^x`, s3 `t` then `k` as a float, s4-s5 the polynomial, s6-s15 the constants (`1 / ln 2`,
// `ROUND`, `ln 2`'s two parts, `C[0..5]`, 1).
core::arch::global_asm!(
    ".syntax unified",
    ".thumb",
    ".arch armv7e-m",
    ".fpu fpv4-sp-d16",
    ".section .text.microlens_exp_shifted,\"ax\",%progbits",
    ".global microlens_exp_shifted",
    ".type microlens_exp_shifted,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_exp_shifted:",
    "push {{r4}}",
    "vldmia r2, {{s6-s15}}",
    "vldr s1, [r3]",
    // -(ROUND's bits) - K_MIN: `t`'s bits plus this is `k - K_MIN`.
    "movw r4, #0x007d",
    "movt r4, #0xb4c0",
    "cbz r1, 2f",
    "1:",
    "vldr s2, [r0]",
    "vsub.f32 s2, s2, s0",
    "vmov.f32 s3, s7",
    "vmla.f32 s3, s2, s6",
    "vmov r2, s3",
    "add r12, r2, r4",
    "cmp r12, #251",
    "bhi 2f",
    "vsub.f32 s3, s3, s7",
    "vmls.f32 s2, s3, s8",
    "vmls.f32 s2, s3, s9",
    "vmov.f32 s4, s13",
    "vmla.f32 s4, s2, s14",
    "vmov.f32 s5, s12",
    "vmla.f32 s5, s2, s4",
    "vmov.f32 s4, s11",
    "vmla.f32 s4, s2, s5",
    "vmov.f32 s5, s10",
    "vmla.f32 s5, s2, s4",
    "vmul.f32 s4, s2, s2",
    "vmla.f32 s2, s4, s5",
    "vadd.f32 s2, s15, s2",
    "vmov r12, s2",
    "add r12, r12, r2, lsl #23",
    "vmov s2, r12",
    "vstmia r0!, {{s2}}",
    "vadd.f32 s1, s1, s2",
    "subs r1, r1, #1",
    "bne 1b",
    "2:",
    "vstr s1, [r3]",
    "mov r0, r1",
    "pop {{r4}}",
    "bx lr",
    ".size microlens_exp_shifted, . - microlens_exp_shifted",
);
