//! The int16 activations' lanes in assembly for cores with the DSP instructions and an FPU
//! (Cortex-M4F, M7, M33): the same operations in the same order as the portable loop
//! (`activations::pack16`), so the same bits. Per four values one `VLDMIA`, four `VMUL` by the
//! inverse scale, four `VADD` of `1.5 * 2^23`, two `VMOV` pairs, two `PKHBT` and one `STRD`: 16
//! instructions with the loop test where the compiler's loop took 24.
//!
//! A function in `global_asm!` with the C calling convention: it clobbers only FPU `s0`-`s7` and
//! general registers its callers save (r4, r5 saved).
#![allow(unsafe_code)]

/// Words `2g`, `2g + 1` of `words` become the low halves of the bits of `x[4g + k] * inv + 1.5 * 2^23`
/// paired `(k = 0, 2)` and `(1, 3)` (low half first), for every `g < min(words.len() / 2, x.len() / 4)`.
#[inline]
pub(crate) fn pack16(words: &mut [u32], x: &[f32], inv: f32) {
    let groups = (words.len() / 2).min(x.len() / 4);
    if groups > 0 {
        // SAFETY: `x` holds `4 * groups` word-aligned words, `words` `2 * groups` writable ones.
        unsafe { microlens_quantize16_lanes(x.as_ptr(), words.as_mut_ptr(), groups, inv) };
    }
}

extern "C" {
    /// Safety: `groups > 0`, `x` points to `4 * groups` word-aligned words, `words` to `2 * groups`
    /// writable ones.
    fn microlens_quantize16_lanes(x: *const f32, words: *mut u32, groups: usize, inv: f32);
}

// r0 the values read, r1 the words written, r2 groups left; s0 `inv`, s1 `1.5 * 2^23`, s4-s7 four
// values then their sums' bits, r3, r12, r4, r5 those bits as integers.
core::arch::global_asm!(
    ".syntax unified",
    ".thumb",
    ".arch armv7e-m",
    ".fpu fpv4-sp-d16",
    ".section .text.microlens_quantize16_lanes,\"ax\",%progbits",
    ".global microlens_quantize16_lanes",
    ".type microlens_quantize16_lanes,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_quantize16_lanes:",
    "push {{r4, r5}}",
    "movw r3, #0",
    "movt r3, #0x4b40",
    "vmov s1, r3",
    "1:",
    "vldmia r0!, {{s4-s7}}",
    "vmul.f32 s4, s4, s0",
    "vmul.f32 s5, s5, s0",
    "vmul.f32 s6, s6, s0",
    "vmul.f32 s7, s7, s0",
    "vadd.f32 s4, s4, s1",
    "vadd.f32 s5, s5, s1",
    "vadd.f32 s6, s6, s1",
    "vadd.f32 s7, s7, s1",
    "vmov r3, r12, s4, s5",
    "vmov r4, r5, s6, s7",
    "pkhbt r3, r3, r4, lsl #16",
    "pkhbt r12, r12, r5, lsl #16",
    "strd r3, r12, [r1], #8",
    "subs r2, r2, #1",
    "bne 1b",
    "pop {{r4, r5}}",
    "bx lr",
    ".size microlens_quantize16_lanes, . - microlens_quantize16_lanes",
);
