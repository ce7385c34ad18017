//! The four-row int8 kernels' loops in assembly for cores with the DSP instructions (`SXTB16`,
//! `SMLAD`: Cortex-M4, M7, M33), behind [`super::dot4`]'s entries:
//!
//! - [`dot4_quads`], the matmuls' (an `I8` matrix in the blob's quads of rows, `blob::quads`): per
//!   group of four columns one `LDRD` of the activation lanes, one `LDMIA` of the quad's four weight
//!   words, eight `SXTB16` and eight `SMLAD` (18 instructions per 16 multiply-accumulates, plus a
//!   two-instruction loop test per eight groups). With an FPU (and int8 matrices in the build) it also
//!   rescales each quad's sums as `int8::matvec` does, `acc * (s_w * s_x) + b`, before they leave the
//!   registers ([`dot4_rescaled`]).
//! - [`dot4_strided`], the KV cache's scores and value mix (rows any stride apart): per group one
//!   `LDRD` of the lanes, then per row `LDR`, two `SXTB16`, two `SMLAD` (21 per 16).
//!
//! Each is one function in `global_asm!` with the C calling convention (its callers keep nothing in
//! the registers it clobbers, FPU `s0`-`s15` among them, so it saves none of those): all fourteen
//! general registers for the loop (LLVM reserves two in an `asm!` block, which would put the loops'
//! ends on the stack), the rest of its state on the stack. The compiler's loop over the same
//! instructions kept two more address adds and the lane split of the vector per group, and called
//! the kernel once per four rows: 28 instructions per 16 multiply-accumulates instead of 21 (strided).
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
/// the loop; when some row ends early, the same loop one quad at a time, over the groups the quad's
/// last row has.
#[inline]
pub(crate) fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    let quads = out.len() / 4;
    let groups = lanes.len() / 2;
    if groups > 0 && quads > 0 && whole(rows, stride, quads, groups) {
        let out = out.as_mut_ptr().cast();
        // SAFETY: the rows are whole (checked), `lanes` holds `2 * groups` words and `out` `4 *
        // quads`, both aligned slices.
        unsafe {
            microlens_dot4_strided(rows.as_ptr(), stride, lanes.as_ptr(), groups, out, quads)
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

/// Whether `quads` quads of `cols` columns each have their first `groups` groups within `w`.
fn whole_quads(w: &[u8], cols: usize, quads: usize, groups: usize) -> bool {
    quads
        .checked_sub(1)
        .and_then(|last| last.checked_mul(cols)?.checked_mul(4))
        .and_then(|start| start.checked_add(16 * groups))
        .is_some_and(|need| need <= w.len())
}

/// The quads kernel (`dot4_quads`, whose sums it computes): when every quad is whole, one call of the
/// loop; else one quad at a time over the groups it has ([`ragged_quads`]).
#[cfg_attr(feature = "weights-i8", allow(dead_code))] // there the rescaling entry takes every int8 matmul
#[inline]
pub(crate) fn dot4_quads(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    let quads = out.len() / 4;
    let groups = (lanes.len() / 2).min(cols / 4);
    if w.as_ptr() as usize % 4 != 0 {
        // An unaligned blob (`LDMIA` needs words): the portable loop.
        return crate::arch::portable::lanes::dot4_quads_portable(w, cols, lanes, out);
    }
    if groups > 0 && quads > 0 && whole_quads(w, cols, quads, groups) {
        let (out, none) = (out.as_mut_ptr().cast(), core::ptr::null());
        // From a quad's last group to the next quad (`4 * cols` fits when there is a next quad,
        // checked by `whole_quads`; one quad never steps).
        let skip = cols.wrapping_mul(4).wrapping_sub(16 * groups);
        // SAFETY: the quads are whole (checked), `lanes` holds `2 * groups` words and `out` `4 *
        // quads`, both aligned slices; no epilogue (null scales).
        unsafe {
            microlens_dot4_quads(
                w.as_ptr(),
                skip,
                lanes.as_ptr(),
                groups,
                out,
                quads,
                none,
                none,
                0,
            )
        };
        return;
    }
    ragged_quads(w, cols, lanes, out);
}

/// [`dot4_quads`] when some quad ends early (or there are no groups): one quad at a time, each over
/// the whole groups it has, through the loop (whole by construction). Out of line.
#[cfg_attr(feature = "weights-i8", allow(dead_code))] // there the rescaling entry takes every int8 matmul
#[cold]
#[inline(never)]
fn ragged_quads(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    let groups = (lanes.len() / 2).min(cols / 4);
    for (sums, quad) in out
        .chunks_exact_mut(4)
        .zip(crate::blob::quads::quads_of(w, cols))
    {
        match lanes.get(..2 * groups.min(quad.len() / 16)) {
            Some(lanes) if !lanes.is_empty() => dot4_quads(quad, cols, lanes, sums),
            _ => sums.fill(0),
        }
    }
}

/// `int8::matvec`'s four-row part in one pass: [`dot4_quads`]' sums `acc_r` of whole quads of rows,
/// each rescaled in the loop's epilogue, `out[r] = acc_r * (s_w[r] * s_x)` then `+ b[r]` (the two
/// roundings of the separate rescaling), `s_w[r]` the `f16` scale widened exactly (`VCVTB`,
/// `VCVTT`). Needs whole quads, at least one group, and `scales` word-aligned with a scale per row;
/// the bias is added when it covers every row from a word-aligned address. Returns how many rows
/// took the bias, or `None` (nothing written) when the quads do not fit or `w` is not word-aligned.
#[cfg(feature = "weights-i8")]
#[inline]
pub(crate) fn dot4_rescaled(
    w: &[u8],
    cols: usize,
    lanes: &[u32],
    out: &mut [f32],
    scales: &[u8],
    s_x: f32,
    bias: &[u8],
) -> Option<usize> {
    let quads = out.len() / 4;
    let groups = (lanes.len() / 2).min(cols / 4);
    let aligned = |b: &[u8]| b.as_ptr() as usize % 4 == 0;
    let fits = groups > 0 && quads > 0 && whole_quads(w, cols, quads, groups);
    if !fits || scales.len() < 8 * quads || !aligned(scales) || !aligned(w) {
        return None;
    }
    let biased = bias.len() >= 16 * quads && aligned(bias);
    let b = match biased {
        true => bias.as_ptr(),
        false => core::ptr::null(),
    };
    // The step to the next quad, as in `dot4_quads`.
    let (out, skip) = (
        out.as_mut_ptr().cast(),
        cols.wrapping_mul(4).wrapping_sub(16 * groups),
    );
    // SAFETY: the quads are whole (checked), `lanes` holds `2 * groups` words and `out` `4 * quads`,
    // both aligned slices; `scales` has the quads' `8 * quads` bytes from a word-aligned address, and
    // the bias, when given, `16 * quads` bytes from a word-aligned one (checked).
    unsafe {
        microlens_dot4_quads(
            w.as_ptr(),
            skip,
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
    /// The loop over `quads` quads of an `I8` matrix in quads of rows (quad `q`'s groups from `w`
    /// on, `16 * groups + skip` bytes per quad) and `groups` groups of lanes, writing per quad to
    /// `out` either the four `i32` sums (`scales` null) or, with an FPU, their rescaled `f32`s
    /// ([`dot4_rescaled`]; `s_x` as bits, `bias` null for none).
    ///
    /// Safety: `groups > 0`, `quads > 0`; `w` word-aligned (`LDMIA`) and every quad `q < quads` has
    /// `16 * groups` readable bytes at `w + q * (16 * groups + skip)`, `skip` a multiple of 4; `lanes` points to `2 * groups` word-aligned words (`LDRD`), `out` to `4 * quads`
    /// writable word-aligned words (`STMIA`, `VSTMIA`); non-null `scales` has `8 * quads` readable
    /// bytes and non-null `bias` `16 * quads`, both word-aligned (`VLDMIA`).
    #[allow(clippy::too_many_arguments)]
    fn microlens_dot4_quads(
        w: *const u8,
        skip: usize,
        lanes: *const u32,
        groups: usize,
        out: *mut u32,
        quads: usize,
        scales: *const u8,
        bias: *const u8,
        s_x: u32,
    );

    /// The loop over `quads` quads of rows (row `r` at `rows + r * stride`) and `groups` groups of
    /// lanes, writing per quad the four `i32` sums to `out`.
    ///
    /// Safety: `groups > 0`, `quads > 0`; every row `r < 4 * quads` has `4 * groups` readable bytes
    /// at `rows + r * stride` (any alignment: `LDR` allows unaligned words on ARMv7E-M); `lanes`
    /// points to `2 * groups` word-aligned words (`LDRD`), `out` to `4 * quads` writable word-aligned
    /// words (`STRD`).
    fn microlens_dot4_strided(
        rows: *const u8,
        stride: usize,
        lanes: *const u32,
        groups: usize,
        out: *mut u32,
        quads: usize,
    );
}

/// One group of the strided loop as assembly text: the lanes of four columns (`LDRD` into r8, r9),
/// then per row one word (r10), its two `SXTB16` splits (r11, r10) and two `SMLAD`s: row 1 at `r0 +
/// r1`, row 2 at `r0 + 2 r1`, row 3 at r12, row 0 at r0 (r12 and r0 step one word), sums in r5, r6,
/// r7, r4.
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

// The strided loop. Registers: r0 row 0, r12 row 3, r1 stride, r2 lanes, r3 their end, r4-r7 the
// sums, r8-r9 a group's lanes, r10-r11 scratch, lr `out`. Stack, after the nine saved registers (36
// bytes) and the 24 reserved: [sp] the lanes' start; 4: `out`'s end; 8: from one quad's row ends to
// the next quad's row starts (`4 * stride - bytes`); 12: the first group's copy (by `groups % 4`,
// from the table's four bytes, Thumb bit set); 16: two zero words; the arguments `out`, `quads` at
// 60, 64. Each loop tests its end after its body, so it runs over exactly `groups` groups and
// `quads` quads.
core::arch::global_asm!(
    ".section .text.microlens_dot4_strided,\"ax\",%progbits",
    ".syntax unified",
    ".thumb",
    // ARMv7E-M's instructions, DSP among them (a subset of the Cortex-M33's ARMv8-M Mainline with its
    // DSP extension, which the assembler of a module-level block does not assume).
    ".arch armv7e-m",
    ".global microlens_dot4_strided",
    ".type microlens_dot4_strided,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_dot4_strided:",
    "push {{r4-r11, lr}}",
    "sub sp, sp, #24",
    "ldr lr, [sp, #60]",
    "ldr r4, [sp, #64]",
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
    "add r12, r0, r1, lsl #1",
    "add r12, r12, r1",
    "movs r4, #0",
    "movs r5, #0",
    "strd r4, r5, [sp, #16]",
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
    "ldrd r4, r5, [sp, #16]",
    "ldrd r6, r7, [sp, #16]",
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
    "strd r4, r5, [lr], #8",
    "strd r6, r7, [lr], #8",
    // The next quad's rows 0 and 3: four rows on from this one's.
    "ldr r10, [sp, #8]",
    "add r0, r0, r10",
    "add r12, r12, r10",
    "ldr r10, [sp, #4]",
    "cmp lr, r10",
    "bne 4b",
    "add sp, sp, #24",
    "pop {{r4-r11, pc}}",
    ".size microlens_dot4_strided, . - microlens_dot4_strided",
);

/// One row of a quads group as assembly text: row `$k`'s word (`$w`, loaded with the others) split by
/// `SXTB16` into r1 and itself, times the lanes r8, r9 into the sum `$s` (`$first`: `SMUAD` starts it).
macro_rules! quad_row {
    ($w:literal, $s:literal, $first:ident) => {
        concat!(
            "sxtb16 r1, ",
            $w,
            "\n",
            first_mac!($s, $first),
            "sxtb16 ",
            $w,
            ", ",
            $w,
            ", ror #8\n",
            "smlad ",
            $s,
            ", ",
            $w,
            ", r9, ",
            $s,
            "\n",
        )
    };
}

/// A quad row's first multiply, of r1 by the lanes r8 into `$s`: `SMUAD` (a quad's first group, the
/// sum started) or `SMLAD` (added to it).
macro_rules! first_mac {
    ($s:literal, smuad) => {
        concat!("smuad ", $s, ", r1, r8\n")
    };
    ($s:literal, smlad) => {
        concat!("smlad ", $s, ", r1, r8, ", $s, "\n")
    };
}

/// One group of the quads loop as assembly text: the lanes of four columns (`LDRD` into r8, r9), the
/// quad's four words (`LDMIA` into r10, r11, r12, lr: rows 0 to 3), each row's two `SXTB16` and two
/// `SMLAD` (the first group of a quad `SMUAD` first: no zeroing) into r4-r7.
macro_rules! quad_group {
    ($op:ident) => {
        concat!(
            "ldrd r8, r9, [r2], #8\n",
            "ldmia r0!, {{r10, r11, r12, lr}}\n",
            quad_row!("r10", "r4", $op),
            quad_row!("r11", "r5", $op),
            quad_row!("r12", "r6", $op),
            quad_row!("lr", "r7", $op),
        )
    };
}

/// The quads loop's rescaling epilogue (label 3, label 31 stepping over the skipped bytes first):
/// sums r4-r7 to `f32` (s0-s3), times (the four `f16` scales, one `VLDMIA`, widened by `VCVTB` and
/// `VCVTT`, times `s_x` in s8), plus the bias when there is one, stored at `out` (label 13); the
/// three pointers (`out` r1, scales r4, bias r5, free once the sums are in s0-s3) loaded and stored
/// back with one `LDM` and one `STM`.
#[cfg(feature = "weights-i8")]
macro_rules! rescale {
    () => {
        concat!(
            "31:\n",
            "ldr r1, [sp, #16]\n",
            "add r0, r0, r1\n",
            "3:\n",
            "vmov s0, s1, r4, r5\n",
            "vmov s2, s3, r6, r7\n",
            "vcvt.f32.s32 s0, s0\n",
            "vcvt.f32.s32 s1, s1\n",
            "vcvt.f32.s32 s2, s2\n",
            "vcvt.f32.s32 s3, s3\n",
            "ldm sp, {{r1, r4, r5}}\n",
            "vldmia r4!, {{s12, s13}}\n",
            "vcvtb.f32.f16 s4, s12\n",
            "vcvtt.f32.f16 s5, s12\n",
            "vcvtb.f32.f16 s6, s13\n",
            "vcvtt.f32.f16 s7, s13\n",
            "vmul.f32 s4, s4, s8\n",
            "vmul.f32 s5, s5, s8\n",
            "vmul.f32 s6, s6, s8\n",
            "vmul.f32 s7, s7, s8\n",
            "vmul.f32 s0, s0, s4\n",
            "vmul.f32 s1, s1, s5\n",
            "vmul.f32 s2, s2, s6\n",
            "vmul.f32 s3, s3, s7\n",
            "cbz r5, 13f\n",
            "vldmia r5!, {{s4-s7}}\n",
            "vadd.f32 s0, s0, s4\n",
            "vadd.f32 s1, s1, s5\n",
            "vadd.f32 s2, s2, s6\n",
            "vadd.f32 s3, s3, s7\n",
            "13:\n",
            "vstmia r1!, {{s0-s3}}\n",
            "stm sp, {{r1, r4, r5}}\n",
        )
    };
}

/// Without an FPU (or int8 matrices), no epilogue: the scales are always null.
#[cfg(not(feature = "weights-i8"))]
macro_rules! rescale {
    () => {
        ""
    };
}

/// Choosing the epilogue (into r11, r12: label 3 or 31) and `s_x` (s8) when the scales (r6) are not
/// null.
#[cfg(feature = "weights-i8")]
macro_rules! rescale_setup {
    () => {
        concat!(
            "cbz r6, 10f\n",
            "vldr s8, [sp, #88]\n",
            "adr r11, 3f\n",
            "adr r12, 31f\n",
            "10:\n",
        )
    };
}

/// Without an FPU (or int8 matrices): nothing (the scales are always null).
#[cfg(not(feature = "weights-i8"))]
macro_rules! rescale_setup {
    () => {
        ""
    };
}

/// The FPU's instructions for the assembler (module-level assembly does not see the target's
/// features): those of the Cortex-M4F's FPv4-SP, which the M7's and M33's include.
#[cfg(feature = "weights-i8")]
macro_rules! fpu {
    () => {
        ".fpu fpv4-sp-d16"
    };
}

/// Without the epilogue: no directive.
#[cfg(not(feature = "weights-i8"))]
macro_rules! fpu {
    () => {
        ""
    };
}

// The quads loop. Registers in the groups: r0 the weights, r2 the lanes, r3 their end, r4-r7 the
// sums, r8-r9 a group's lanes, r10-r12 and lr its four words, r1 scratch. Stack, after the nine
// saved registers (36 bytes) and the 36 reserved: [sp] `out` so far, 4: the scales so far, 8: the
// bias so far (one `LDM`/`STM` in the epilogue); 12: the lanes' start; 16: the bytes from one quad's
// last group to the next quad (`skip`); 20: where the loop enters after a quad's first group (by
// `(groups - 1) % 8`, from the table's eight bytes; the epilogue's address when there is one group
// only); 24: the epilogue's (2 or 3, 21 or 31 with a skip; Thumb bit set); 28: `out`'s end; the
// arguments `out`, `quads`, `scales`, `bias`, `s_x` at 72, 76, 80, 84, 88. Each loop tests its end after its body, so it runs
// over exactly `groups` groups and `quads` quads.
core::arch::global_asm!(
    ".section .text.microlens_dot4_quads,\"ax\",%progbits",
    ".syntax unified",
    ".thumb",
    ".arch armv7e-m",
    fpu!(),
    ".global microlens_dot4_quads",
    ".type microlens_dot4_quads,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_dot4_quads:",
    "push {{r4-r11, lr}}",
    "sub sp, sp, #36",
    "str r2, [sp, #12]",
    "str r1, [sp, #16]",
    "ldrd r4, r5, [sp, #72]",
    "str r4, [sp]",
    "add r5, r4, r5, lsl #4",
    "str r5, [sp, #28]",
    "ldrd r6, r7, [sp, #80]",
    "strd r6, r7, [sp, #4]",
    // The loop's entry after the first group, by `(groups - 1) % 8`.
    "sub r10, r3, #1",
    "and r9, r10, #7",
    "adr r11, 7f",
    "ldrb r9, [r11, r9]",
    "adr r11, 40f",
    "add r11, r11, r9, lsl #1",
    "orr r11, r11, #1",
    "str r11, [sp, #20]",
    "add r3, r2, r3, lsl #3",
    // The epilogue: the sums as they are, or rescaled; stepping over `skip` bytes first if any.
    "adr r11, 2f",
    "adr r12, 21f",
    rescale_setup!(),
    "cmp r1, #0",
    "it ne",
    "movne r11, r12",
    "orr r11, r11, #1",
    "str r11, [sp, #24]",
    "cmp r10, #0",
    "it eq",
    "streq r11, [sp, #20]",
    // One quad: its first group, then the others.
    "4:",
    "ldr r2, [sp, #12]",
    quad_group!(smuad),
    "ldr pc, [sp, #20]",
    "40:",
    quad_group!(smlad),
    "41:",
    quad_group!(smlad),
    "42:",
    quad_group!(smlad),
    "43:",
    quad_group!(smlad),
    "44:",
    quad_group!(smlad),
    "45:",
    quad_group!(smlad),
    "46:",
    quad_group!(smlad),
    "47:",
    quad_group!(smlad),
    "cmp r2, r3",
    "bne 40b",
    "ldr pc, [sp, #24]",
    // The sums as they are.
    "21:",
    "ldr r1, [sp, #16]",
    "add r0, r0, r1",
    "2:",
    "ldr r1, [sp]",
    "stmia r1!, {{r4-r7}}",
    "str r1, [sp]",
    "b 12f",
    rescale!(),
    // `out` so far, and the next quad unless it was the last.
    "12:",
    "ldr r8, [sp, #28]",
    "cmp r1, r8",
    "bne 4b",
    "add sp, sp, #36",
    "pop {{r4-r11, pc}}",
    // Half the offset of the copy the loop enters at, by `(groups - 1) % 8` (the last seven copies
    // span 504 bytes: each half-offset fits a byte).
    "7:",
    ".byte 0",
    ".byte (47b - 40b) / 2",
    ".byte (46b - 40b) / 2",
    ".byte (45b - 40b) / 2",
    ".byte (44b - 40b) / 2",
    ".byte (43b - 40b) / 2",
    ".byte (42b - 40b) / 2",
    ".byte (41b - 40b) / 2",
    ".p2align 1",
    ".size microlens_dot4_quads, . - microlens_dot4_quads",
);
