//! The norms' passes and the residual stream's adds in assembly for cores with an FPU and the DSP
//! instructions (Cortex-M4F, M7, M33, M55): the portable loops' operations in their order
//! ([`super::vector_loops`]), so the same bits, four values per `VLDMIA`/`VSTMIA` where the compiler
//! loads and stores them one by one:
//!
//! - [`sum4`]: per four values one `VLDMIA` and four `VADD` (7 with the loop test, was 11);
//! - [`centre4`]: per four one `VLDMIA`, four `VSUB`, four `VMLA` (product rounded, then the sum:
//!   the portable `sq += v * v`), one `VSTMIA` (12, was 19);
//! - [`divide4`]: per four one `VLDMIA`, four `VDIV`, one `VSTMIA` (8, was 15);
//! - [`add`]: per four two `VLDMIA`, four `VADD`, one `VSTMIA` (9, was 21), the last `n % 4` one by
//!   one in the same call;
//! - [`sqrt`]: `VSQRT`, correctly rounded as `libm::sqrtf` is (libm itself takes the hardware square
//!   root on x86 and AArch64), one instruction and the call where libm's integer loop takes about 90.
//!
//! Functions in `global_asm!` with the C calling convention: they clobber only FPU `s0`-`s7` and
//! `r0`-`r2`.
#![allow(unsafe_code)]

/// `t + x[0] + x[1] + ...` left to right over the first `x.len() / 4 * 4` values.
#[inline]
pub(crate) fn sum4(x: &[f32], t: f32) -> f32 {
    let groups = x.len() / 4;
    // SAFETY: `x` holds `4 * groups` word-aligned words.
    unsafe { microlens_sum4(x.as_ptr(), groups, t) }
}

/// `x[i] = src[i] - mean` and `sq += x[i] * x[i]` (the product rounded, then the sum) in order over
/// the first `min(x.len(), src.len()) / 4 * 4` values; returns `sq`.
#[inline]
pub(crate) fn centre4(x: &mut [f32], src: &[f32], mean: f32, sq: f32) -> f32 {
    let groups = x.len().min(src.len()) / 4;
    // SAFETY: `src` holds `4 * groups` word-aligned words, `x` as many writable ones.
    unsafe { microlens_centre4(src.as_ptr(), x.as_mut_ptr(), groups, mean, sq) }
}

/// `x[i] /= scale` over the first `x.len() / 4 * 4` values.
#[inline]
pub(crate) fn divide4(x: &mut [f32], scale: f32) {
    let groups = x.len() / 4;
    // SAFETY: `x` holds `4 * groups` word-aligned writable words.
    unsafe { microlens_divide4(x.as_mut_ptr(), groups, scale) }
}

/// `acc[i] += x[i]` as far as both go.
#[inline]
pub(crate) fn add(acc: &mut [f32], x: &[f32]) {
    let n = acc.len().min(x.len());
    // SAFETY: `x` holds `n` word-aligned words, `acc` as many writable ones.
    unsafe { microlens_add(acc.as_mut_ptr(), x.as_ptr(), n) }
}

/// `sqrt(x)`, correctly rounded (`VSQRT`): what `libm::sqrtf` returns.
#[inline(always)]
pub(crate) fn sqrt(x: f32) -> f32 {
    // SAFETY: registers only.
    unsafe { microlens_sqrt(x) }
}

extern "C" {
    /// Safety: `x` points to `4 * groups` word-aligned words.
    fn microlens_sum4(x: *const f32, groups: usize, t: f32) -> f32;
    /// Safety: `src` points to `4 * groups` word-aligned words, `x` to as many writable ones.
    fn microlens_centre4(src: *const f32, x: *mut f32, groups: usize, mean: f32, sq: f32) -> f32;
    /// Safety: `x` points to `4 * groups` word-aligned writable words.
    fn microlens_divide4(x: *mut f32, groups: usize, scale: f32);
    /// Safety: `x` points to `n` word-aligned words, `acc` to as many writable ones.
    fn microlens_add(acc: *mut f32, x: *const f32, n: usize);
    /// Safety: none needed (registers only).
    fn microlens_sqrt(x: f32) -> f32;
}

/// The directives that open function `$name` in its own section.
macro_rules! function {
    ($name:literal) => {
        concat!(
            ".section .text.",
            $name,
            ",\"ax\",%progbits\n",
            ".global ",
            $name,
            "\n",
            ".type ",
            $name,
            ",%function\n",
            ".p2align 2\n",
            ".thumb_func\n",
            $name,
            ":\n"
        )
    };
}

// Sum: r0 the values, r1 groups left, s0 the sum, s4-s7 four values. Centre: r0 the source, r1 the
// copy, r2 groups left, s0 the mean, s1 the squares' sum, s4-s7 four values. Divide: r0 the values,
// r1 groups left, s0 the scale. Add: r0 `acc`, r1 `x`, r2 groups left, s0-s3 four of `acc`, s4-s7
// four of `x`, r3 the groups left.
core::arch::global_asm!(
    ".syntax unified",
    ".thumb",
    ".arch armv7e-m",
    ".fpu fpv4-sp-d16",
    function!("microlens_sum4"),
    "cbz r1, 2f",
    "1:",
    "vldmia r0!, {{s4-s7}}",
    "vadd.f32 s0, s0, s4",
    "vadd.f32 s0, s0, s5",
    "vadd.f32 s0, s0, s6",
    "vadd.f32 s0, s0, s7",
    "subs r1, r1, #1",
    "bne 1b",
    "2:",
    "bx lr",
    ".size microlens_sum4, . - microlens_sum4",
    function!("microlens_centre4"),
    "cbz r2, 2f",
    "1:",
    "vldmia r0!, {{s4-s7}}",
    "vsub.f32 s4, s4, s0",
    "vsub.f32 s5, s5, s0",
    "vsub.f32 s6, s6, s0",
    "vsub.f32 s7, s7, s0",
    "vmla.f32 s1, s4, s4",
    "vmla.f32 s1, s5, s5",
    "vmla.f32 s1, s6, s6",
    "vmla.f32 s1, s7, s7",
    "vstmia r1!, {{s4-s7}}",
    "subs r2, r2, #1",
    "bne 1b",
    "2:",
    "vmov.f32 s0, s1",
    "bx lr",
    ".size microlens_centre4, . - microlens_centre4",
    function!("microlens_divide4"),
    "cbz r1, 2f",
    "1:",
    "vldmia r0, {{s4-s7}}",
    "vdiv.f32 s4, s4, s0",
    "vdiv.f32 s5, s5, s0",
    "vdiv.f32 s6, s6, s0",
    "vdiv.f32 s7, s7, s0",
    "vstmia r0!, {{s4-s7}}",
    "subs r1, r1, #1",
    "bne 1b",
    "2:",
    "bx lr",
    ".size microlens_divide4, . - microlens_divide4",
    function!("microlens_add"),
    "lsrs r3, r2, #2",
    "beq 2f",
    "1:",
    "vldmia r0, {{s0-s3}}",
    "vldmia r1!, {{s4-s7}}",
    "vadd.f32 s0, s0, s4",
    "vadd.f32 s1, s1, s5",
    "vadd.f32 s2, s2, s6",
    "vadd.f32 s3, s3, s7",
    "vstmia r0!, {{s0-s3}}",
    "subs r3, r3, #1",
    "bne 1b",
    "2:",
    "ands r2, r2, #3",
    "beq 4f",
    "3:",
    "vldr s0, [r0]",
    "vldmia r1!, {{s4}}",
    "vadd.f32 s0, s0, s4",
    "vstmia r0!, {{s0}}",
    "subs r2, r2, #1",
    "bne 3b",
    "4:",
    "bx lr",
    ".size microlens_add, . - microlens_add",
    function!("microlens_sqrt"),
    "vsqrt.f32 s0, s0",
    "bx lr",
    ".size microlens_sqrt, . - microlens_sqrt",
);
