//! The `i8g` kernel's loop in assembly for cores with the DSP instructions and an FPU (Cortex-M4F,
//! M7, M33, M55), behind [`super::int8_groups::matvec`]: two rows per pass, two groups of
//! [`I8_GROUP`] columns per step.
//!
//! Per group one `LDMIA` of the four activation lane words serves both rows; per row one `LDRD` of its
//! two weight words, four `SXTB16` and four `SMLAD` (`SMUAD` first: the group's sum starts from 0,
//! exact in `i32`); one `VMOV` hands both rows' sums to the FPU. Per two groups: four `VCVT.F32.S32`
//! of the sums, two `LDR` and one `VMOV` for the four `f16` scales (a word per row: two groups'
//! scales), four `VCVTB`/`VCVTT` widening them exactly, four `VMLA.F32` into the rows' totals (product
//! rounded, then the sum: the portable `t += a * s`, in group order), and the loop test. That is 57
//! instructions per 32 multiply-accumulates: per group and row 14.25 (1.78 per MAC). Per pass the
//! totals start at 0 (`VMOV` of a zero word: the portable `0.0`) and end times `s_x` (`VMUL.F32`),
//! stored with one `VSTMIA`: 13 more. A row of an odd number of groups starts with its first group
//! alone (the same instructions, one `LDRH` of a scale per row, and `VMUL.F32` for the first
//! product: `0 + a * s` is `a * s`, never `-0` for a positive scale), then the rest two by two.
//!
//! Two functions in `global_asm!` (even and odd numbers of groups) with the C calling convention
//! (their callers keep nothing in the registers they clobber, FPU `s0`-`s15` among them), all
//! fourteen general registers for the loop, the constants on the stack.
#![allow(unsafe_code)]

use crate::blob::dtype::{I8_GROUP, SCALE_BYTES};

/// `out[r] = (sum_g acc_g * s_w[r][g]) * s_x` for the first rows of an `i8g` matrix, two at a time,
/// as `int8_groups::matvec`'s portable loop computes them bit for bit (for every scale
/// `Matrix::from_parts` accepts: finite, positive). `words` holds whole rows of `cols` columns, `scales`
/// their `f16` scales, `lanes` the activation lanes (`cols / 2` words; int8 [`Quantized::lanes`] or
/// int16 values in the same order). Returns the rows done: the even number of rows that `out`,
/// `words` and `scales` all hold, or 0 (nothing written) unless `cols` is a positive whole number of
/// groups and `lanes` has `cols / 2` words.
///
/// [`Quantized::lanes`]: super::quantized::Quantized::lanes
pub(crate) fn rows2(
    words: &[u32],
    cols: usize,
    scales: &[u8],
    lanes: &[u32],
    s_x: f32,
    out: &mut [f32],
) -> usize {
    if cols == 0 || cols % I8_GROUP != 0 || lanes.len() != cols / 2 {
        return 0;
    }
    let groups = cols / I8_GROUP;
    let pairs = out
        .len()
        .min(words.len() / (cols / 4))
        .min(scales.len() / (groups * SCALE_BYTES))
        / 2;
    if pairs == 0 {
        return 0;
    }
    let rows2 = match groups % 2 {
        0 => microlens_i8g_rows2,
        _ => microlens_i8g_rows2_odd,
    };
    // SAFETY: `pairs >= 1` pairs of rows, each row `cols` bytes (a multiple of 8) of `words` (a
    // word-aligned `&[u32]`, for `LDRD`) with its `cols / 4` bytes of `scales` (`LDR`, `LDRH`, which
    // ARMv7E-M/ARMv8-M allow unaligned), all within the slices (checked above); `lanes` has the
    // `cols / 2` words every pass reads (`LDMIA`, word-aligned); `out` the `2 * pairs` words written
    // (`VSTMIA`, word-aligned `&mut [f32]`); the function for `groups`' parity.
    unsafe {
        rows2(
            words.as_ptr(),
            cols,
            scales.as_ptr(),
            lanes.as_ptr(),
            out.as_mut_ptr(),
            pairs,
            s_x.to_bits(),
        )
    };
    2 * pairs
}

extern "C" {
    /// The loop over `pairs` pairs of rows of `cols` columns (row `r` at `w + r * cols`, its scales at
    /// `scales + r * cols / 4`) against the lanes, writing per row `total * s_x` (`s_x` as bits) to
    /// `out`.
    ///
    /// Safety: `pairs > 0`, `cols` a positive multiple of 16; `w` word-aligned with `2 * pairs * cols`
    /// readable bytes, `scales` with `2 * pairs * cols / 4` readable bytes (any alignment), `lanes`
    /// word-aligned with `cols / 2` readable words, `out` word-aligned with `2 * pairs` writable
    /// words.
    fn microlens_i8g_rows2(
        w: *const u32,
        cols: usize,
        scales: *const u8,
        lanes: *const u32,
        out: *mut f32,
        pairs: usize,
        s_x: u32,
    );

    /// [`microlens_i8g_rows2`] for rows of an odd number of groups: `cols` an odd multiple of 8.
    fn microlens_i8g_rows2_odd(
        w: *const u32,
        cols: usize,
        scales: *const u8,
        lanes: *const u32,
        out: *mut f32,
        pairs: usize,
        s_x: u32,
    );
}

/// One group of both rows as assembly text: the four lane words (`LDMIA` from lr into r0-r3), then per
/// row (0 from r9 into r7, 1 from r10 into r8) its two words, four `SXTB16` and four `SMLAD`
/// (`SMUAD` first: `row!`), then both sums into `$s` (two consecutive single registers).
macro_rules! group {
    ($s:literal) => {
        concat!(
            "ldmia lr!, {{r0-r3}}\n",
            row!("r9", "r7"),
            row!("r10", "r8"),
            "vmov ",
            $s,
            ", r7, r8\n",
        )
    };
}

/// One row's part of a group: the words at `$p` (stepped by 8) into r4, r5, their bytes as lanes times
/// r0-r3, summed into `$acc` (bytes 0 and 2 of the first word with lanes r0, 1 and 3 with r1, the
/// second word's with r2 and r3: `mac_lanes`). The sum's register holds the first lanes before the
/// sum starts, r4 the second word's even bytes once the first word is spent: no scratch register.
macro_rules! row {
    ($p:literal, $acc:literal) => {
        concat!(
            "ldrd r4, r5, [",
            $p,
            "], #8\n",
            "sxtb16 ",
            $acc,
            ", r4\n",
            "smuad ",
            $acc,
            ", ",
            $acc,
            ", r0\n",
            "sxtb16 r4, r4, ror #8\n",
            "smlad ",
            $acc,
            ", r4, r1, ",
            $acc,
            "\n",
            "sxtb16 r4, r5\n",
            "smlad ",
            $acc,
            ", r4, r2, ",
            $acc,
            "\n",
            "sxtb16 r5, r5, ror #8\n",
            "smlad ",
            $acc,
            ", r5, r3, ",
            $acc,
            "\n",
        )
    };
}

/// The start of a pass over rows of an even number of groups: the totals s12, s13 set to 0.
macro_rules! start_even {
    () => {
        concat!("movs r4, #0\n", "vmov s12, s13, r4, r4\n",)
    };
}

/// The start of a pass over rows of an odd number of groups: the first group alone, its sums times
/// its scales (one `LDRH` per row, `VCVTB`) the totals s12, s13; straight to the pass's end (label
/// 5) when it was the only group.
macro_rules! start_odd {
    () => {
        concat!(
            group!("s0, s1"),
            "vcvt.f32.s32 s0, s0\n",
            "vcvt.f32.s32 s1, s1\n",
            "ldrh r5, [r11, r6]\n",
            "ldrh r4, [r11], #2\n",
            "vmov s4, s5, r4, r5\n",
            "vcvtb.f32.f16 s6, s4\n",
            "vcvtb.f32.f16 s8, s5\n",
            "vmul.f32 s12, s0, s6\n",
            "vmul.f32 s13, s1, s8\n",
            "cmp lr, r12\n",
            "beq 5f\n",
        )
    };
}

// Registers in the loop: r0-r3 a group's lanes, lr the lanes so far, r12 their end; r9, r10 rows 0
// and 1 so far; r11 row 0's scales so far, r6 the bytes of scales per row (`cols / 4`: row 1's are
// r11 + r6); r4, r5 a row's words, r7, r8 the rows' group sums. FPU: s0-s3 the sums of two groups
// as `f32` (row 0, row 1, row 0, row 1), s4, s5 two scales per row as loaded, s6-s9 widened (row
// 0's two, row 1's two), s12, s13 the rows' totals, s14 `s_x`. Stack, after the nine saved
// registers (36 bytes) and the 12 reserved (and 4 of padding): [sp] `out` so far, 4: its end; the
// arguments `out`, `pairs`, `s_x` at 52, 56, 60. Each loop tests its end after its body: exactly
// `pairs` passes, each of `cols / 16` steps (after the lone first group for an odd number of
// groups, which skips the steps when it was the only one).
macro_rules! rows2_asm {
    ($name:literal, $start:expr) => {
        core::arch::global_asm!(
            concat!(".section .text.", $name, ",\"ax\",%progbits"),
            ".syntax unified",
            ".thumb",
            // ARMv7E-M's DSP instructions and the FPv4-SP's (with the half-precision conversions),
            // both subsets of the M33's and M55's, which the assembler of a module-level block does
            // not assume.
            ".arch armv7e-m",
            ".fpu fpv4-sp-d16",
            concat!(".global ", $name),
            concat!(".type ", $name, ",%function"),
            ".p2align 2",
            ".thumb_func",
            concat!($name, ":"),
            "push {{r4-r11, lr}}",
            "sub sp, sp, #16",
            "mov r9, r0",
            "add r10, r0, r1",
            "mov r11, r2",
            "mov lr, r3",
            "add r12, r3, r1, lsl #1",
            "lsr r6, r1, #2",
            "ldrd r4, r5, [sp, #52]",
            "add r5, r4, r5, lsl #3",
            "strd r4, r5, [sp]",
            "vldr s14, [sp, #60]",
            // One pass: two rows.
            "2:",
            $start,
            // One step: two groups.
            "3:",
            group!("s0, s1"),
            group!("s2, s3"),
            "vcvt.f32.s32 s0, s0",
            "vcvt.f32.s32 s1, s1",
            "vcvt.f32.s32 s2, s2",
            "vcvt.f32.s32 s3, s3",
            "ldr r5, [r11, r6]",
            "ldr r4, [r11], #4",
            "vmov s4, s5, r4, r5",
            "vcvtb.f32.f16 s6, s4",
            "vcvtt.f32.f16 s7, s4",
            "vcvtb.f32.f16 s8, s5",
            "vcvtt.f32.f16 s9, s5",
            "vmla.f32 s12, s0, s6",
            "vmla.f32 s13, s1, s8",
            "vmla.f32 s12, s2, s7",
            "vmla.f32 s13, s3, s9",
            "cmp lr, r12",
            "bne 3b",
            // The totals times `s_x`, stored; the next pair of rows (each pointer one row, `4 * r6`
            // bytes, on) and its scales (row 0's past row 1's), the lanes from their start (`2 *
            // cols` bytes back).
            "5:",
            "vmul.f32 s12, s12, s14",
            "vmul.f32 s13, s13, s14",
            "ldrd r4, r5, [sp]",
            "vstmia r4!, {{s12, s13}}",
            "str r4, [sp]",
            "add r9, r9, r6, lsl #2",
            "add r10, r10, r6, lsl #2",
            "add r11, r11, r6",
            "sub lr, lr, r6, lsl #3",
            "cmp r4, r5",
            "bne 2b",
            "add sp, sp, #16",
            "pop {{r4-r11, pc}}",
            concat!(".size ", $name, ", . - ", $name),
        );
    };
}

rows2_asm!("microlens_i8g_rows2", start_even!());
rows2_asm!("microlens_i8g_rows2_odd", start_odd!());
