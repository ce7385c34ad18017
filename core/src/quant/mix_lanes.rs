//! The value mix's fixed-point weights ([`super::mix`]) in assembly for cores with the DSP
//! instructions and an FPU (Cortex-M4F, M7, M33): per four weights one `VLDMIA`, four `VMLA` of `w *
//! inv` onto 0.5, four `VCVT.S16.F32` (towards zero, saturated to the `i16` range, NaN to 0: what
//! `((w * inv + 0.5) as i32).clamp(-32768, 32767)` gives), two `VMOV` pairs, two `PKHBT` and one `STRD`
//! of the two lane words: 20 instructions per four weights, where the compiler's loop took 37 (a
//! conversion to `i32`, a move and an `SSAT` per weight).
//!
//! One function in `global_asm!` with the C calling convention: it clobbers only FPU `s0`-`s11` and
//! general registers its callers save (r4, r5 it saves itself).
#![allow(unsafe_code)]

/// Words `4g .. 4g + 4` of `words` (the `f32` bits of four weights `w`) become words `2g`, `2g + 1`:
/// `(pack(q0, q2), pack(q1, q3))` with `q = fixed(w, inv)`, for every `g < words.len() / 4`, in
/// place (group `g` reads what groups before it have not written).
#[inline]
pub(crate) fn pack_lanes(words: &mut [u32], inv: f32) {
    let groups = words.len() / 4;
    if groups > 0 {
        // SAFETY: `words` holds `4 * groups` word-aligned words, read and written in place as the
        // function's contract says.
        unsafe { microlens_mix_lanes(words.as_mut_ptr(), groups, inv) };
    }
}

extern "C" {
    /// Safety: `groups > 0` and `words` points to `4 * groups` word-aligned writable words.
    fn microlens_mix_lanes(words: *mut u32, groups: usize, inv: f32);
}

// Registers: r0 the weights read, r2 the words written, r1 groups left, s0 `inv`, s1 0.5, s4-s7 four
// weights, s8-s11 their fixed-point values, r3, r12, r4, r5 the values as integers.
core::arch::global_asm!(
    ".section .text.microlens_mix_lanes,\"ax\",%progbits",
    ".syntax unified",
    ".thumb",
    ".arch armv7e-m",
    ".fpu fpv4-sp-d16",
    ".global microlens_mix_lanes",
    ".type microlens_mix_lanes,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_mix_lanes:",
    "push {{r4, r5}}",
    "mov r2, r0",
    "vmov.f32 s1, #0.5",
    "1:",
    "vldmia r0!, {{s4-s7}}",
    "vmov.f32 s8, s1",
    "vmov.f32 s9, s1",
    "vmov.f32 s10, s1",
    "vmov.f32 s11, s1",
    "vmla.f32 s8, s4, s0",
    "vmla.f32 s9, s5, s0",
    "vmla.f32 s10, s6, s0",
    "vmla.f32 s11, s7, s0",
    "vcvt.s16.f32 s8, s8, #0",
    "vcvt.s16.f32 s9, s9, #0",
    "vcvt.s16.f32 s10, s10, #0",
    "vcvt.s16.f32 s11, s11, #0",
    "vmov r3, r12, s8, s9",
    "vmov r4, r5, s10, s11",
    "pkhbt r3, r3, r4, lsl #16",
    "pkhbt r12, r12, r5, lsl #16",
    "strd r3, r12, [r2], #8",
    "subs r1, r1, #1",
    "bne 1b",
    "pop {{r4, r5}}",
    "bx lr",
    ".size microlens_mix_lanes, . - microlens_mix_lanes",
);
