//! The four-row int8 kernel's loop in assembly for cores with the DSP instructions (`SXTB16`, `SMLAD`:
//! Cortex-M4, M7, M33), behind [`super::dot4::dot4_strided`]: per group of four columns one `LDRD` of
//! the activation lanes, then per row `LDR`, two `SXTB16`, two `SMLAD` (21 instructions per 16
//! multiply-accumulates, plus a two-instruction loop test per four groups). With an FPU (and int8
//! matrices in the build) it also rescales each quad's sums as `int8::matvec` does, `acc * (s_w *
//! s_x) + b`, before they leave the registers ([`dot4_rescaled`]).
//!
//! One function in `global_asm!` with the C calling convention (its callers keep nothing in the
//! registers it clobbers, FPU `s0`-`s15` among them, so it saves none of those): all fourteen general
//! registers for the loop (LLVM reserves two in an `asm!` block, which would put the loops' ends on
//! the stack), 40 bytes of state on the stack. The compiler's loop over the same instructions kept two
//! more address adds and the lane split of the vector per group, and called the kernel once per four
//! rows: 28 instructions per 16 multiply-accumulates instead of 21.
#![allow(unsafe_code)]

/// Whether rows `0 .. 4 * quads`, `stride` bytes apart, each have `4 * groups` bytes within `rows`.
fn whole(rows: &[u8], stride: usize, quads: usize, groups: usize) -> bool {
    (4 * quads)
        .checked_sub(1)
        .and_then(|last| last.checked_mul(stride))
        .and_then(|start| start.checked_add(4 * groups))
        .is_some_and(|need| need <= rows.len())
}

/// The four-row kernel (`dot4_strided`, whose sums it computes): when every row is whole, one call of
/// the loop (per quad of rows 14 instructions besides the groups); when some row ends early, the same
/// loop one quad at a time, over the groups the quad's last row has.
#[inline]
pub(crate) fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    let quads = out.len() / 4;
    let groups = lanes.len() / 2;
    if groups > 0 && quads > 0 && whole(rows, stride, quads, groups) {
        let (out, end) = (out.as_mut_ptr().cast(), core::ptr::null());
        // SAFETY: the rows are whole (checked), `lanes` holds `2 * groups` words and `out` `4 *
        // quads`, both aligned slices; no epilogue (null scales).
        unsafe {
            microlens_dot4_quads(
                rows.as_ptr(),
                stride,
                lanes.as_ptr(),
                groups,
                out,
                quads,
                end,
                end,
                0,
            )
        };
        return;
    }
    ragged(rows, stride, lanes, out);
}

/// [`dot4_strided`] when some row ends early (or there are no groups): one quad at a time, each over
/// the groups its last (shortest) row has, through the loop (a call that is whole by construction,
/// so it recurses no further): what the portable kernel computes, without a second copy in flash.
/// Out of line, so that the whole rows' call saves no registers for it.
#[cold]
#[inline(never)]
fn ragged(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    let groups = lanes.len() / 2;
    for (q, sums) in out.chunks_exact_mut(4).enumerate() {
        let rows = rows.get((4 * q).saturating_mul(stride)..).unwrap_or(&[]);
        let last = rows.len().saturating_sub(stride.saturating_mul(3));
        match lanes.get(..2 * groups.min(last / 4)) {
            Some(lanes) if !lanes.is_empty() => dot4_strided(rows, stride, lanes, sums),
            _ => sums.fill(0),
        }
    }
}

/// `int8::matvec`'s four-row part in one pass: [`dot4_strided`]'s sums `acc_r` of whole quads of rows,
/// each rescaled in the loop's epilogue, `out[r] = acc_r * (s_w[r] * s_x)` then `+ b[r]` (the two
/// roundings of the separate rescaling), `s_w[r]` the `f16` scale's bits
/// ([`crate::blob::scale_bits_pair`]) and `s_x` already times [`crate::blob::SCALE_UNIT`]. Needs whole
/// rows, at least one group, and `scales` word-aligned with a scale per row; the bias is added when it
/// covers every row from a word-aligned address. Returns how many rows took the bias, or `None`
/// (nothing written) when the rows do not fit.
#[cfg(all(target_abi = "eabihf", feature = "weights-i8"))]
#[inline]
pub(crate) fn dot4_rescaled(
    rows: &[u8],
    stride: usize,
    lanes: &[u32],
    out: &mut [f32],
    scales: &[u8],
    s_x: f32,
    bias: &[u8],
) -> Option<usize> {
    let quads = out.len() / 4;
    let groups = lanes.len() / 2;
    let aligned = |b: &[u8]| b.as_ptr() as usize % 4 == 0;
    let fits = groups > 0 && quads > 0 && whole(rows, stride, quads, groups);
    if !fits || scales.len() < 8 * quads || !aligned(scales) {
        return None;
    }
    let biased = bias.len() >= 16 * quads && aligned(bias);
    let b = match biased {
        true => bias.as_ptr(),
        false => core::ptr::null(),
    };
    let out = out.as_mut_ptr().cast();
    // SAFETY: the rows are whole (checked), `lanes` holds `2 * groups` words and `out` `4 * quads`,
    // both aligned slices; `scales` has the quads' `8 * quads` bytes from a word-aligned address, and
    // the bias, when given, `16 * quads` bytes from a word-aligned one (checked).
    unsafe {
        microlens_dot4_quads(
            rows.as_ptr(),
            stride,
            lanes.as_ptr(),
            groups,
            out,
            quads,
            scales.as_ptr(),
            b,
            s_x.to_bits(),
        )
    };
    Some(if biased { 4 * quads } else { 0 })
}

extern "C" {
    /// The loop over `quads` quads of rows (row `r` at `rows + r * stride`) and `groups` groups of
    /// lanes, writing per quad to `out` either the four `i32` sums (`scales` null) or, with an FPU,
    /// their rescaled `f32`s ([`dot4_rescaled`]; `s_x` as bits, `bias` null for none).
    ///
    /// Safety: `groups > 0`, `quads > 0`; every row `r < 4 * quads` has `4 * groups` readable bytes
    /// at `rows + r * stride` (any alignment: `LDR` allows unaligned words on ARMv7E-M); `lanes`
    /// points to `2 * groups` word-aligned words (`LDRD`), `out` to `4 * quads` writable word-aligned
    /// words (`STRD`, `VSTMIA`); non-null `scales` has `8 * quads` readable bytes and non-null `bias`
    /// `16 * quads`, both word-aligned (`LDRD`, `VLDMIA`).
    #[allow(clippy::too_many_arguments)]
    fn microlens_dot4_quads(
        rows: *const u8,
        stride: usize,
        lanes: *const u32,
        groups: usize,
        out: *mut u32,
        quads: usize,
        scales: *const u8,
        bias: *const u8,
        s_x: u32,
    );
}

/// One group as assembly text: the lanes of four columns (`LDRD` into r8, r9), then per row one word
/// (r10), its two `SXTB16` splits (r11, r10) and two `SMLAD`s: row 1 at `r0 + r1`, row 2 at `r0 +
/// 2 r1`, row 3 at r12, row 0 at r0 (r12 and r0 step one word), sums in r5, r6, r7, r4.
macro_rules! group {
    () => {
        concat!(
            "ldrd r8, r9, [r2], #8\n",
            "ldr.w r10, [r0, r1]\n",
            "sxtb16 r11, r10\n",
            "smlad r5, r11, r8, r5\n",
            "sxtb16 r10, r10, ror #8\n",
            "smlad r5, r10, r9, r5\n",
            "ldr.w r10, [r0, r1, lsl #1]\n",
            "sxtb16 r11, r10\n",
            "smlad r6, r11, r8, r6\n",
            "sxtb16 r10, r10, ror #8\n",
            "smlad r6, r10, r9, r6\n",
            "ldr r10, [r12], #4\n",
            "sxtb16 r11, r10\n",
            "smlad r7, r11, r8, r7\n",
            "sxtb16 r10, r10, ror #8\n",
            "smlad r7, r10, r9, r7\n",
            "ldr r10, [r0], #4\n",
            "sxtb16 r11, r10\n",
            "smlad r4, r11, r8, r4\n",
            "sxtb16 r10, r10, ror #8\n",
            "smlad r4, r10, r9, r4\n",
        )
    };
}

/// The rescaling epilogue (label 3): sums r4-r7 to `f32` (s0-s3), times (the scales' bits, two `f16`
/// per word masked into place, times `s_x` in s8), plus the bias when there is one, stored at `lr`.
#[cfg(all(target_abi = "eabihf", feature = "weights-i8"))]
macro_rules! rescale {
    () => {
        concat!(
            "3:\n",
            "vmov s0, s1, r4, r5\n",
            "vmov s2, s3, r6, r7\n",
            "vcvt.f32.s32 s0, s0\n",
            "vcvt.f32.s32 s1, s1\n",
            "vcvt.f32.s32 s2, s2\n",
            "vcvt.f32.s32 s3, s3\n",
            "ldr r11, [sp, #20]\n",
            "ldrd r8, r9, [r11], #8\n",
            "str r11, [sp, #20]\n",
            "ldr r10, [sp, #28]\n",
            "and r11, r10, r8, lsl #13\n",
            "and r8, r10, r8, lsr #3\n",
            "vmov s4, s5, r11, r8\n",
            "and r11, r10, r9, lsl #13\n",
            "and r9, r10, r9, lsr #3\n",
            "vmov s6, s7, r11, r9\n",
            "vmul.f32 s4, s4, s8\n",
            "vmul.f32 s5, s5, s8\n",
            "vmul.f32 s6, s6, s8\n",
            "vmul.f32 s7, s7, s8\n",
            "vmul.f32 s0, s0, s4\n",
            "vmul.f32 s1, s1, s5\n",
            "vmul.f32 s2, s2, s6\n",
            "vmul.f32 s3, s3, s7\n",
            "ldr r11, [sp, #24]\n",
            "cmp r11, #0\n",
            "beq 13f\n",
            "vldmia r11!, {{s4-s7}}\n",
            "str r11, [sp, #24]\n",
            "vadd.f32 s0, s0, s4\n",
            "vadd.f32 s1, s1, s5\n",
            "vadd.f32 s2, s2, s6\n",
            "vadd.f32 s3, s3, s7\n",
            "13:\n",
            "vstmia lr!, {{s0-s3}}\n",
        )
    };
}

/// Without an FPU (or int8 matrices), no epilogue: the scales are always null.
#[cfg(not(all(target_abi = "eabihf", feature = "weights-i8")))]
macro_rules! rescale {
    () => {
        "3:\n"
    };
}

/// Setting up the epilogue (s8 = `s_x`, the mask, label 3 into r11) when the scales are not null.
#[cfg(all(target_abi = "eabihf", feature = "weights-i8"))]
macro_rules! rescale_setup {
    () => {
        concat!(
            "vldr s8, [sp, #92]\n",
            "movw r4, #0xe000\n",
            "movt r4, #0x0fff\n",
            "str r4, [sp, #28]\n",
            "adr r11, 3f\n",
        )
    };
}

/// The FPU's instructions for the assembler (module-level assembly does not see the target's
/// features): those of the Cortex-M4F's FPv4-SP, which the M7's and M33's include.
#[cfg(all(target_abi = "eabihf", feature = "weights-i8"))]
macro_rules! fpu {
    () => {
        ".fpu fpv4-sp-d16"
    };
}

/// Without the epilogue: no directive.
#[cfg(not(all(target_abi = "eabihf", feature = "weights-i8")))]
macro_rules! fpu {
    () => {
        ""
    };
}

/// Without an FPU (or int8 matrices): nothing (the scales are always null).
#[cfg(not(all(target_abi = "eabihf", feature = "weights-i8")))]
macro_rules! rescale_setup {
    () => {
        ""
    };
}

// Registers: r0 row 0, r12 row 3, r1 stride, r2 lanes, r3 their end, r4-r7 the sums, r8-r9 a
// group's lanes, r10-r11 scratch, lr `out`. Stack, after the nine saved registers (36 bytes) and the
// 40 reserved: [sp] the lanes' start; 4: `out`'s end; 8: from one quad's row ends to the next
// quad's row starts (`4 * stride - bytes`); 12: the first group's copy (by `groups % 4`, from the
// table's four bytes, Thumb bit set); 16: the epilogue's; 20: the scales so far; 24: the bias so
// far; 28: the scale bits' mask; 32: two zero words; the arguments `out`, `quads`, `scales`,
// `bias`, `s_x` at 76, 80, 84, 88, 92. Each loop tests its end after its body, so it runs over
// exactly `groups` groups and `quads` quads.
core::arch::global_asm!(
    ".section .text.microlens_dot4_quads,\"ax\",%progbits",
    ".syntax unified",
    ".thumb",
    // ARMv7E-M's instructions, DSP among them (a subset of the Cortex-M33's ARMv8-M Mainline with its
    // DSP extension, which the assembler of a module-level block does not assume).
    ".arch armv7e-m",
    fpu!(),
    ".global microlens_dot4_quads",
    ".type microlens_dot4_quads,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_dot4_quads:",
    "push {{r4-r11, lr}}",
    "sub sp, sp, #40",
    "ldr lr, [sp, #76]",
    "ldr r4, [sp, #80]",
    "add r5, lr, r4, lsl #4",
    "str r5, [sp, #4]",
    "str r2, [sp]",
    "lsl r11, r3, #2",
    "and r10, r3, #3",
    "add r3, r2, r3, lsl #3",
    "rsb r11, r11, r1, lsl #2",
    "str r11, [sp, #8]",
    "adr r11, 7f",
    "ldrb r10, [r11, r10]",
    "adr r11, 5f",
    "add r11, r11, r10, lsl #1",
    "orr r11, r11, #1",
    "str r11, [sp, #12]",
    "ldrd r6, r7, [sp, #84]",
    "strd r6, r7, [sp, #20]",
    "adr r11, 2f",
    "cbz r6, 10f",
    rescale_setup!(),
    "10:",
    "orr r11, r11, #1",
    "str r11, [sp, #16]",
    "add r12, r0, r1, lsl #1",
    "add r12, r12, r1",
    "movs r4, #0",
    "movs r5, #0",
    "strd r4, r5, [sp, #32]",
    "b 4f",
    // Half the offset of the copy the first group enters at, by `groups % 4`.
    "7:",
    ".byte 0",
    ".byte (6f - 5f) / 2",
    ".byte (9f - 5f) / 2",
    ".byte (8f - 5f) / 2",
    ".p2align 1",
    // One quad of rows.
    "4:",
    "ldr r2, [sp]",
    "ldrd r4, r5, [sp, #32]",
    "ldrd r6, r7, [sp, #32]",
    "ldr pc, [sp, #12]",
    "5:",
    group!(),
    "8:",
    group!(),
    "9:",
    group!(),
    "6:",
    group!(),
    "cmp r2, r3",
    "bne 5b",
    "ldr pc, [sp, #16]",
    // The sums as they are.
    "2:",
    "strd r4, r5, [lr], #8",
    "strd r6, r7, [lr], #8",
    "b 12f",
    rescale!(),
    // The next quad's rows 0 and 3: four rows on from this one's.
    "12:",
    "ldr r10, [sp, #8]",
    "add r0, r0, r10",
    "add r12, r12, r10",
    "ldr r10, [sp, #4]",
    "cmp lr, r10",
    "bne 4b",
    "add sp, sp, #40",
    "pop {{r4-r11, pc}}",
    ".size microlens_dot4_quads, . - microlens_dot4_quads",
);
