//! The int4 matrix-vector kernel (`quant::int4_rows`) for int8 activations as one `asm!` loop.
//!
//! Registers through the loop: `r0-r3` the four activation lanes of eight columns (`LDMIA` from
//! `lr`), `r4`/`r5` the group sums of rows 0 and 1, `r8` the mask,
//! `r9`/`r10` a word and its lanes, `r11` row 0's next word (row 1 at `r11 + r12`, `r12` the bytes per
//! row). Below `sp`: the scales of row 0's group, the bytes per row of scales, `out` so far and its
//! end. FPU: `s0-s3` the group sums as `f32`, `s4-s7` the scales, `s8`/`s9` the rows' totals, `s10`
//! the factor of the last chunk (`s_x`, else 1).
#![allow(unsafe_code)]

use crate::blob::dtype::I4_GROUP;

/// The top nibble of each 16-bit lane (`quant::int4_rows`' mask).
const MASK: u32 = 0xf000_f000;

/// Activation lanes per group: two 16-bit lanes per word.
const GROUP_LANES: usize = I4_GROUP / 2;

/// Packed words per group: eight nibbles per word.
const GROUP_WORDS: usize = I4_GROUP / 8;

/// One word of both rows: the lanes of its eight columns, then per row (1 at `r11 + r12`, then 0,
/// which steps `r11`) the word, four lanes and four multiply-accumulates; `$m1`/`$m0` the first
/// ones (`SMUAD` to start a group, else `SMLAD`).
macro_rules! word {
    ($m1:literal, $m0:literal) => {
        concat!(
            "ldmia lr!, {{r0-r3}}\n",
            "ldr r9, [r11, r12]\n",
            "and r10, r8, r9, lsl #12\n",
            $m1,
            "\n",
            "and r10, r8, r9, lsl #8\n",
            "smlad r5, r10, r1, r5\n",
            "and r10, r8, r9, lsl #4\n",
            "smlad r5, r10, r2, r5\n",
            "and r9, r9, r8\n",
            "smlad r5, r9, r3, r5\n",
            "ldr r9, [r11], #4\n",
            "and r10, r8, r9, lsl #12\n",
            $m0,
            "\n",
            "and r10, r8, r9, lsl #8\n",
            "smlad r4, r10, r1, r4\n",
            "and r10, r8, r9, lsl #4\n",
            "smlad r4, r10, r2, r4\n",
            "and r9, r9, r8\n",
            "smlad r4, r9, r3, r4\n",
        )
    };
}

/// One group (four words) of both rows, its sums left in `r4` (row 0) and `r5` (row 1).
macro_rules! group {
    () => {
        concat!(
            word!("smuad r5, r10, r0", "smuad r4, r10, r0"),
            word!("smlad r5, r10, r0, r5", "smlad r4, r10, r0, r4"),
            word!("smlad r5, r10, r0, r5", "smlad r4, r10, r0, r4"),
            word!("smlad r5, r10, r0, r5", "smlad r4, r10, r0, r4"),
        )
    };
}

/// The scales of both rows for `$n` groups (row 0's at `[sp]`, row 1's a row of scales on, and
/// the pointer stepped two rows) widened into `s4-s7` (row 0's first group `s4`, row 1's `s5`,
/// their second `s6`, `s7`), and the group sums `s0-s3` converted (`4096 * acc` to `acc`).
macro_rules! scales {
    (2) => {
        concat!(
            "ldrd r0, r1, [sp]\n",
            "ldr r2, [r0]\n",
            "ldr r3, [r0, r1]\n",
            "add r0, r0, r1, lsl #1\n",
            "str r0, [sp]\n",
            "vmov s4, s5, r2, r3\n",
            "vcvtt.f32.f16 s6, s4\n",
            "vcvtb.f32.f16 s4, s4\n",
            "vcvtt.f32.f16 s7, s5\n",
            "vcvtb.f32.f16 s5, s5\n",
            "vcvt.f32.s32 s0, s0, #12\n",
            "vcvt.f32.s32 s1, s1, #12\n",
            "vcvt.f32.s32 s2, s2, #12\n",
            "vcvt.f32.s32 s3, s3, #12\n",
        )
    };
    (1) => {
        concat!(
            "ldrd r0, r1, [sp]\n",
            "ldrh r2, [r0]\n",
            "ldrh r3, [r0, r1]\n",
            "add r0, r0, r1, lsl #1\n",
            "str r0, [sp]\n",
            "vmov s4, s5, r2, r3\n",
            "vcvtb.f32.f16 s4, s4\n",
            "vcvtb.f32.f16 s5, s5\n",
            "vcvt.f32.s32 s0, s0, #12\n",
            "vcvt.f32.s32 s1, s1, #12\n",
        )
    };
}

/// `r0`, `r1`: `out` so far and its end. The rows' totals `s8`, `s9` with the first group's
/// `sum * scale`: the totals so far from `out`
/// plus it (`later`), or (`first`) just it, which is `0 + sum * scale` bit for bit (a positive
/// scale times an integer is never `-0`).
macro_rules! start {
    (first) => {
        concat!(
            "ldrd r0, r1, [sp, #8]\n",
            "vmul.f32 s8, s0, s4\n",
            "vmul.f32 s9, s1, s5\n",
        )
    };
    (later) => {
        concat!(
            "ldrd r0, r1, [sp, #8]\n",
            "vldmia r0, {{s8-s9}}\n",
            "vmla.f32 s8, s0, s4\n",
            "vmla.f32 s9, s1, s5\n",
        )
    };
}

/// The end of a pass: the totals (`s8`, `s9`) times the factor `s10`, stored at `r0` (the end of
/// `out` in `r1`); the next
/// pair of rows (`$lanes` bytes of lanes and `$words` bytes of each row were read); the loop.
macro_rules! next_pass {
    ($lanes:literal, $words:literal) => {
        concat!(
            "vmul.f32 s8, s8, s10\n",
            "vmul.f32 s9, s9, s10\n",
            "vstmia r0!, {{s8-s9}}\n",
            "str r0, [sp, #8]\n",
            "sub lr, lr, #",
            $lanes,
            "\n",
            "add r11, r11, r12, lsl #1\n",
            "sub r11, r11, #",
            $words,
            "\n",
            "cmp r0, r1\n",
            "bne 2b\n",
        )
    };
}

/// The whole loop over the passes, its pass body `$pass`: the state (`r0`: row 0's scales, the
/// bytes per row of scales, `out`, its end, the factor) below `sp` and in `s10`, the FPU registers
/// saved and restored.
macro_rules! passes {
    ($pass:expr, $state:expr, $p0:expr, $stride:expr, $lanes:expr) => {
        core::arch::asm!(
            "vpush {{s0-s10}}",
            "ldmia r0, {{r1, r2, r3, r9, r10}}",
            "push {{r1, r2, r3, r9}}",
            "vmov s10, r10",
            "2:",
            $pass,
            "add sp, sp, #16",
            "vpop {{s0-s10}}",
            inout("r0") $state => _,
            out("r1") _,
            out("r2") _,
            out("r3") _,
            out("r4") _,
            out("r5") _,
            in("r8") MASK,
            out("r9") _,
            out("r10") _,
            inout("r11") $p0 => _,
            in("r12") $stride,
            inout("lr") $lanes => _,
        )
    };
}

/// A pass over two groups (`$start`: `first` or `later`).
macro_rules! two {
    ($start:tt) => {
        concat!(
            group!(),
            "vmov s0, s1, r4, r5\n",
            group!(),
            "vmov s2, s3, r4, r5\n",
            scales!(2),
            start!($start),
            "vmla.f32 s8, s2, s6\n",
            "vmla.f32 s9, s3, s7\n",
            next_pass!("128", "32"),
        )
    };
}

/// A pass over one group.
macro_rules! one {
    ($start:tt) => {
        concat!(
            group!(),
            "vmov s0, s1, r4, r5\n",
            scales!(1),
            start!($start),
            next_pass!("64", "16"),
        )
    };
}

/// `out[r] = (out[r] + sum_g acc_g * s_w[r][g]) * factor` over the chunk of `n` groups (1 or 2)
/// from group `g` of every row, `out[r]` taken as 0 for the first chunk (`g == 0`): `words` holds
/// the whole rows of `groups` groups (`out.len()` of them, even, at least 2) and `scales` their
/// scales.
fn chunk(
    words: &[u32],
    groups: usize,
    scales: &[u8],
    lanes: &[u32],
    (g, n): (usize, usize),
    factor: f32,
    out: &mut [f32],
) {
    let src = lanes
        .get(g * GROUP_LANES..(g + n) * GROUP_LANES)
        .unwrap_or(&[]);
    let row_words = groups * GROUP_WORDS;
    let whole = (1..=2).contains(&n)
        && g + n <= groups
        && src.len() == n * GROUP_LANES
        && out.len() >= 2
        && out.len() % 2 == 0
        && words.len() >= out.len() * row_words
        && scales.len() >= out.len() * groups * 2;
    if !whole {
        return;
    }
    let state: [u32; 5] = [
        scales.as_ptr().wrapping_add(2 * g) as u32,
        (2 * groups) as u32,
        out.as_mut_ptr() as u32,
        out.as_mut_ptr().wrapping_add(out.len()) as u32,
        factor.to_bits(),
    ];
    let (state, lanes) = (state.as_ptr(), src.as_ptr());
    let p0 = words.as_ptr().wrapping_add(g * GROUP_WORDS);
    let stride = 4 * row_words;
    // SAFETY: every access is in bounds and aligned as required (checked above). The loop runs
    // `out.len() / 2 >= 1` passes (its test follows its body), pass `p` over rows `2p` and `2p + 1`:
    // it reads their `4n` words from group `g` on (`r11` and `r11 + r12`, within `words`, a
    // `&[u32]`), the `16n` words of `src` (`LDMIA`, word-aligned, within `lanes`; `lr` steps
    // back to the start after each pass), their `n` scales from group `g` (`LDR` of two `f16`
    // for `n = 2`, which the ARMv7-M/v8-M `LDR` allows unaligned, or `LDRH`; within `scales`),
    // and writes (for a later chunk first reads) the two words of `out` (`VLDMIA`/`VSTMIA`,
    // `&mut [f32]`, word-aligned), `out.len()` in all. It keeps four words of `state` below `sp`
    // and releases them (the stack, hence no `nostack`), saves and restores the FPU registers it
    // uses (`s0-s10`; `sreg` operands would need the `vfp2` target feature, which a
    // single-precision FPU lacks), changes the flags and the sticky Q flag, which no Rust code
    // reads; every core register it writes is an operand. `VCVTB`/`VCVTT` widen the scales
    // exactly, `VCVT.F32.S32 #12` divides the multiple of 4096 exactly, and `VMLA.F32` rounds
    // the product and then the sum (ARMv7E-M's is not fused), with FPSCR at its reset value
    // (round to nearest, no flush to zero, IEEE half precision).
    unsafe {
        match (n, g) {
            (2, 0) => passes!(two!(first), state, p0, stride, lanes),
            (2, _) => passes!(two!(later), state, p0, stride, lanes),
            (_, 0) => passes!(one!(first), state, p0, stride, lanes),
            _ => passes!(one!(later), state, p0, stride, lanes),
        }
    }
}

/// `out[r] = (sum_g acc_g * s_w[r][g]) * s_x` for the whole rows in `words` (`out.len()` of them,
/// even, at least 2, `groups` groups each, their scales in `scales`; `lanes` in this kernel's
/// order): chunks of two groups (one for an odd last group), the totals in `out` from 0 in group
/// order, multiplied by `s_x` after the last chunk.
pub(crate) fn matvec(
    words: &[u32],
    groups: usize,
    scales: &[u8],
    lanes: &[u32],
    s_x: f32,
    out: &mut [f32],
) {
    let mut g = 0;
    while g < groups {
        let n = (groups - g).min(2);
        let factor = if g + n == groups { s_x } else { 1.0 };
        chunk(words, groups, scales, lanes, (g, n), factor, out);
        g += n;
    }
}
