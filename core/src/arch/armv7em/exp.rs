//! The softmax's first half ([`crate::math::softmax::exp_shifted`]) in assembly for cores with an FPU and
//! the DSP instructions (Cortex-M4F, M7, M33, M55): [`crate::math::exp::exp`]'s operations in its order, each
//! constant in a register for the whole run, two scores per pass: 27 instructions per score where the
//! compiler's loop took 32 (per score `VSUB`, the rounding (`VMOV`, `VMLA`), the range test on `k`
//! (`VMOV`, `ADD`, `CMP`, `BHI`), `k` as a float, two `VMLS` for `r`, the polynomial (four
//! `VMOV`/`VMLA` pairs, `VMUL`, `VMLA`, `VADD`), the exponent (`VMOV`, `ADD ... LSL #23`, `VMOV`),
//! the sum; per pair one `VLDMIA`, one `VSTMIA` and the loop test), the last odd score alone (29).
//! A score whose `k` is out of the fast path's range ends the run: the caller computes it with
//! [`crate::math::exp::exp`] and starts the next run after it.
//!
//! One function in `global_asm!` with the C calling convention: it clobbers FPU `s0`-`s15` and the
//! general registers its callers save (r4, r5 and `s16`-`s19` saved itself).
#![allow(unsafe_code)]

use crate::math::exp::{C, INV_LN2, LN2_HI, LN2_LO, ROUND};

/// The constants of the loop, in the order its registers take them: those of
/// [`crate::math::exp::exp`], then 1.
static LOOP_CONSTANTS: [f32; 10] = [
    INV_LN2, ROUND, LN2_HI, LN2_LO, C[0], C[1], C[2], C[3], C[4], 1.0,
];

/// The softmax's first half, `x_i <- e^(x_i - max)` returning their sum added in order: runs of the
/// assembly loop, each value that leaves its fast path through [`crate::math::exp::exp`] between them.
#[inline(always)]
pub(crate) fn exp_shifted(x: &mut [f32], max: f32) -> Option<f32> {
    let mut sum = 0.0f32;
    let mut at = run(x, max, &mut sum);
    while let Some(v) = x.get_mut(at) {
        let e = crate::math::exp::exp(*v - max);
        *v = e;
        sum += e;
        at += 1;
        at += run(x.get_mut(at..).unwrap_or(&mut []), max, &mut sum);
    }
    Some(sum)
}

/// `x_i <- e^(x_i - max)` from the start of `x` while `e^(x_i - max)` takes [`crate::math::exp::exp`]'s fast
/// path, each added to `sum` in order; returns how many were done (the next one, if any, takes the
/// slow path).
#[inline]
fn run(x: &mut [f32], max: f32, sum: &mut f32) -> usize {
    let consts = &LOOP_CONSTANTS;
    // SAFETY: `x` holds `x.len()` word-aligned writable words, `consts` ten readable words, `sum` one
    // writable word.
    let left = unsafe { microlens_exp_shifted(x.as_mut_ptr(), x.len(), consts.as_ptr(), sum, max) };
    x.len() - left
}

extern "C" {
    /// Safety: `x` points to `n` word-aligned writable words, `consts` to the ten words of
    /// [`LOOP_CONSTANTS`], `sum` to a writable word. Returns the scores left (the first
    /// of them not done).
    fn microlens_exp_shifted(
        x: *mut f32,
        n: usize,
        consts: *const f32,
        sum: *mut f32,
        max: f32,
    ) -> usize;
}

/// `k` (the bits of `t` in `$t`, copied to `$k`) in the fast path's range, else a branch to `$out`.
macro_rules! in_range {
    ($t:literal, $k:literal, $out:literal) => {
        concat!(
            "vmov ",
            $k,
            ", ",
            $t,
            "\n",
            "add r12, ",
            $k,
            ", r4\n",
            "cmp r12, #251\n",
            "bhi ",
            $out,
            "\n",
        )
    };
}

/// `t = ROUND + x / ln 2` in `$t` from `x` (the score minus the maximum) in `$x`.
macro_rules! round_k {
    ($x:literal, $t:literal) => {
        concat!(
            "vmov.f32 ",
            $t,
            ", s7\n",
            "vmla.f32 ",
            $t,
            ", ",
            $x,
            ", s6\n"
        )
    };
}

/// `$d = $c + $x * $p` (`VMLA` onto a copy of the constant `$c`).
macro_rules! mla_onto {
    ($d:literal, $c:literal, $x:literal, $p:literal) => {
        concat!(
            "vmov.f32 ",
            $d,
            ", ",
            $c,
            "\n",
            "vmla.f32 ",
            $d,
            ", ",
            $x,
            ", ",
            $p,
            "\n"
        )
    };
}

/// From `x` in `$x`, `t` in `$t` and `k`'s bits in `$k` (the range tested): `e^x` in `$x`, with `$p`
/// and `$q` the polynomial's registers (`r = x - k ln 2` in two parts, `e^r = 1 + r + r^2 q(r)`, `k`
/// added to the exponent).
macro_rules! exp_steps {
    ($x:literal, $t:literal, $k:literal, $p:literal, $q:literal) => {
        concat!(
            "vsub.f32 ",
            $t,
            ", ",
            $t,
            ", s7\n",
            "vmls.f32 ",
            $x,
            ", ",
            $t,
            ", s8\n",
            "vmls.f32 ",
            $x,
            ", ",
            $t,
            ", s9\n",
            mla_onto!($p, "s13", $x, "s14"),
            mla_onto!($q, "s12", $x, $p),
            mla_onto!($p, "s11", $x, $q),
            mla_onto!($q, "s10", $x, $p),
            "vmul.f32 ",
            $p,
            ", ",
            $x,
            ", ",
            $x,
            "\n",
            "vmla.f32 ",
            $x,
            ", ",
            $p,
            ", ",
            $q,
            "\n",
            "vadd.f32 ",
            $x,
            ", s15, ",
            $x,
            "\n",
            "vmov r12, ",
            $x,
            "\n",
            "add r12, r12, ",
            $k,
            ", lsl #23\n",
            "vmov ",
            $x,
            ", r12\n",
        )
    };
}

// Registers: r0 the scores, r1 those left (less two in the loop of pairs), r2 and r5 `t`'s bits (`k`
// plus `ROUND`'s bits), r3 `sum`'s address, r4 `K_MIN`'s offset from `ROUND`'s bits, r12 scratch; s0
// `max`, s1 the sum, s6-s15 the constants (`1 / ln 2`, `ROUND`, `ln 2`'s two parts, `C[0..5]`, 1).
// One score: s2 `x` then `r` then `e^x`, s3 `t` then `k` as a float, s4-s5 the polynomial. Two
// scores: s16-s17 their `x`, s18-s19 their `t`, s4-s5 and s2-s3 their polynomials. A pair with a
// score out of the range goes to the loop of one score, which takes the first again.
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
    "push {{r4, r5}}",
    "vpush {{s16-s19}}",
    "vldmia r2, {{s6-s15}}",
    "vldr s1, [r3]",
    // -(ROUND's bits) - K_MIN: `t`'s bits plus this is `k - K_MIN`.
    "movw r4, #0x007d",
    "movt r4, #0xb4c0",
    "subs r1, r1, #2",
    "blo 5f",
    "4:",
    "vldmia r0, {{s16-s17}}",
    "vsub.f32 s16, s16, s0",
    "vsub.f32 s17, s17, s0",
    round_k!("s16", "s18"),
    round_k!("s17", "s19"),
    in_range!("s18", "r2", "5f"),
    in_range!("s19", "r5", "5f"),
    exp_steps!("s16", "s18", "r2", "s4", "s5"),
    exp_steps!("s17", "s19", "r5", "s2", "s3"),
    "vstmia r0!, {{s16-s17}}",
    "vadd.f32 s1, s1, s16",
    "vadd.f32 s1, s1, s17",
    "subs r1, r1, #2",
    "bhs 4b",
    "5:",
    "adds r1, r1, #2",
    "beq 2f",
    "1:",
    "vldr s2, [r0]",
    "vsub.f32 s2, s2, s0",
    round_k!("s2", "s3"),
    in_range!("s3", "r2", "2f"),
    exp_steps!("s2", "s3", "r2", "s4", "s5"),
    "vstmia r0!, {{s2}}",
    "vadd.f32 s1, s1, s2",
    "subs r1, r1, #1",
    "bne 1b",
    "2:",
    "vstr s1, [r3]",
    "mov r0, r1",
    "vpop {{s16-s19}}",
    "pop {{r4, r5}}",
    "bx lr",
    ".size microlens_exp_shifted, . - microlens_exp_shifted",
);
