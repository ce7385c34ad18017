//! The attention's per-score and per-position loops in assembly for cores with the DSP instructions
//! and an FPU (Cortex-M4F, M7, M33, M55), the same operations in the same order as their portable Rust
//! (`KvCache::scores`, [`super::mix`]), so the same bits:
//!
//! - [`scores`]: `(acc_j * (s_q * s_kj)) / attn_scale` from the kernel's sums and their maximum, per
//!   four keys two `VLDMIA`, four `VCVT`, eight `VMUL`, four `VDIV`, one `VSTMIA` and four compares
//!   (`VCMP`, `VMRS`, a conditional `VMOV`): 37 instructions where the compiler's loop took 60;
//! - [`weight_bits`]: the mix's weights `p_j / sum * s_vj` and the largest of their bits, per four
//!   two `VLDMIA`, four `VDIV`, four `VMUL`, one `VSTMIA`, two `VMOV` pairs and four unsigned
//!   compares (`CMP`, `IT`, `MOV`): 27 instructions where the compiler's loop took 44;
//! - [`pack_lanes`]: the mix's fixed-point weights, per four one `VLDMIA`, four `VMLA` of `w * inv`
//!   onto 0.5, four `VCVT.S16.F32` (towards zero, saturated to the `i16` range, NaN to 0: what
//!   `((w * inv + 0.5) as i32).clamp(-32768, 32767)` gives), two `VMOV` pairs, two `PKHBT`, one
//!   `STRD`: 20 instructions where the compiler's loop took 37;
//! - [`rescale`]: the mix's sums times its scale, per four 11 instructions instead of 44.
//!
//! Functions in `global_asm!` with the C calling convention: they clobber only FPU `s0`-`s11` and
//! general registers their callers save (r4, r5 saved where used).
#![allow(unsafe_code)]

/// `row[j] = (acc_j * (s_q * scales[j])) / attn_scale` for `j < min(row.len(), scales.len())`, `acc_j`
/// the `i32` sum whose bits `row[j]` holds, returning the scores' maximum from `-inf`, NaNs ignored
/// (as [`crate::math::max_of`], in order).
#[inline]
pub(crate) fn scores(row: &mut [f32], scales: &[f32], s_q: f32, attn_scale: f32) -> f32 {
    let n = row.len().min(scales.len());
    // SAFETY: `row` and `scales` hold at least `n` word-aligned words each.
    unsafe { microlens_attn_scores(row.as_mut_ptr(), scales.as_ptr(), n, s_q, attn_scale) }
}

/// `p_j <- p_j / sum * scales[j]` for `j < min(pattern.len(), scales.len())`, returning the largest
/// of their bits (0 for none).
#[inline]
pub(crate) fn weight_bits(pattern: &mut [f32], scales: &[f32], sum: f32) -> u32 {
    let n = pattern.len().min(scales.len());
    // SAFETY: `pattern` and `scales` hold at least `n` word-aligned words each.
    unsafe { microlens_mix_weights(pattern.as_mut_ptr(), scales.as_ptr(), n, sum) }
}

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

/// `z[i] = acc_i as f32 * scale` for every `i`, `acc_i` the `i32` sum whose bits `z[i]` holds.
#[inline]
pub(crate) fn rescale(z: &mut [f32], scale: f32) {
    // SAFETY: `z` holds `z.len()` word-aligned words.
    unsafe { microlens_mix_rescale(z.as_mut_ptr(), z.len(), scale) };
}

extern "C" {
    /// Safety: `row` and `scales` point to `n` word-aligned words each, `row`'s writable.
    fn microlens_attn_scores(
        row: *mut f32,
        scales: *const f32,
        n: usize,
        s_q: f32,
        attn_scale: f32,
    ) -> f32;
    /// Safety: `pattern` and `scales` point to `n` word-aligned words each, `pattern`'s writable.
    fn microlens_mix_weights(pattern: *mut f32, scales: *const f32, n: usize, sum: f32) -> u32;
    /// Safety: `groups > 0` and `words` points to `4 * groups` word-aligned writable words.
    fn microlens_mix_lanes(words: *mut u32, groups: usize, inv: f32);
    /// Safety: `z` points to `n` word-aligned writable words.
    fn microlens_mix_rescale(z: *mut f32, n: usize, scale: f32);
}

/// One weight's bits (`rx`) into the unsigned maximum in r3.
macro_rules! top {
    ($r:literal) => {
        concat!("cmp ", $r, ", r3\n", "it hi\n", "movhi r3, ", $r, "\n")
    };
}

/// One score's maximum: `s2 = s_x` if `s_x > s2` (unordered, a NaN, is not greater).
macro_rules! keep {
    ($s:literal) => {
        concat!(
            "vcmp.f32 ",
            $s,
            ", s2\n",
            "vmrs APSR_nzcv, fpscr\n",
            "it gt\n",
            "vmovgt.f32 s2, ",
            $s,
            "\n"
        )
    };
}

// Scores: r0 the row, r1 the scales, r2 the count, r3 the quads left; s0 `s_q`, s1 `attn_scale`, s2 the
// maximum, s4-s7 sums then scores, s8-s11 scales then `s_q * s_k`. Weights: r0 the pattern, r1 the
// scales, r2 the count, r12 the quads left, r3 the largest bits, r4-r5 a pair's bits; s0 `sum`, s4-s7
// the weights, s8-s11 the scales. Lanes: r0 the weights read, r2 the
// words written, r1 groups left, s0 `inv`, s1 0.5, s4-s7 four weights, s8-s11 their fixed-point
// values, r3, r12, r4, r5 the values as integers. Rescale: r0 `z`, r1 the count, r2 the quads left, s0
// the scale.
core::arch::global_asm!(
    ".syntax unified",
    ".thumb",
    ".arch armv7e-m",
    ".fpu fpv4-sp-d16",
    ".section .text.microlens_attn_scores,\"ax\",%progbits",
    ".global microlens_attn_scores",
    ".type microlens_attn_scores,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_attn_scores:",
    "movw r3, #0",
    "movt r3, #0xff80",
    "vmov s2, r3",
    "lsrs r3, r2, #2",
    "beq 2f",
    "1:",
    "vldmia r0, {{s4-s7}}",
    "vldmia r1!, {{s8-s11}}",
    "vcvt.f32.s32 s4, s4",
    "vcvt.f32.s32 s5, s5",
    "vcvt.f32.s32 s6, s6",
    "vcvt.f32.s32 s7, s7",
    "vmul.f32 s8, s0, s8",
    "vmul.f32 s9, s0, s9",
    "vmul.f32 s10, s0, s10",
    "vmul.f32 s11, s0, s11",
    "vmul.f32 s4, s4, s8",
    "vmul.f32 s5, s5, s9",
    "vmul.f32 s6, s6, s10",
    "vmul.f32 s7, s7, s11",
    "vdiv.f32 s4, s4, s1",
    "vdiv.f32 s5, s5, s1",
    "vdiv.f32 s6, s6, s1",
    "vdiv.f32 s7, s7, s1",
    "vstmia r0!, {{s4-s7}}",
    keep!("s4"),
    keep!("s5"),
    keep!("s6"),
    keep!("s7"),
    "subs r3, r3, #1",
    "bne 1b",
    "2:",
    "ands r2, r2, #3",
    "beq 4f",
    "3:",
    "vldr s4, [r0]",
    "vldmia r1!, {{s8}}",
    "vcvt.f32.s32 s4, s4",
    "vmul.f32 s8, s0, s8",
    "vmul.f32 s4, s4, s8",
    "vdiv.f32 s4, s4, s1",
    "vstmia r0!, {{s4}}",
    keep!("s4"),
    "subs r2, r2, #1",
    "bne 3b",
    "4:",
    "vmov.f32 s0, s2",
    "bx lr",
    ".size microlens_attn_scores, . - microlens_attn_scores",
    ".section .text.microlens_mix_weights,\"ax\",%progbits",
    ".global microlens_mix_weights",
    ".type microlens_mix_weights,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_mix_weights:",
    "push {{r4, r5}}",
    "movs r3, #0",
    "lsrs r12, r2, #2",
    "beq 2f",
    "1:",
    "vldmia r0, {{s4-s7}}",
    "vldmia r1!, {{s8-s11}}",
    "vdiv.f32 s4, s4, s0",
    "vdiv.f32 s5, s5, s0",
    "vdiv.f32 s6, s6, s0",
    "vdiv.f32 s7, s7, s0",
    "vmul.f32 s4, s4, s8",
    "vmul.f32 s5, s5, s9",
    "vmul.f32 s6, s6, s10",
    "vmul.f32 s7, s7, s11",
    "vstmia r0!, {{s4-s7}}",
    "vmov r4, r5, s4, s5",
    top!("r4"),
    top!("r5"),
    "vmov r4, r5, s6, s7",
    top!("r4"),
    top!("r5"),
    "subs r12, r12, #1",
    "bne 1b",
    "2:",
    "ands r2, r2, #3",
    "beq 4f",
    "3:",
    "vldr s4, [r0]",
    "vldmia r1!, {{s8}}",
    "vdiv.f32 s4, s4, s0",
    "vmul.f32 s4, s4, s8",
    "vstmia r0!, {{s4}}",
    "vmov r4, s4",
    top!("r4"),
    "subs r2, r2, #1",
    "bne 3b",
    "4:",
    "mov r0, r3",
    "pop {{r4, r5}}",
    "bx lr",
    ".size microlens_mix_weights, . - microlens_mix_weights",
    ".section .text.microlens_mix_lanes,\"ax\",%progbits",
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
    ".section .text.microlens_mix_rescale,\"ax\",%progbits",
    ".global microlens_mix_rescale",
    ".type microlens_mix_rescale,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_mix_rescale:",
    "lsrs r2, r1, #2",
    "beq 2f",
    "1:",
    "vldmia r0, {{s4-s7}}",
    "vcvt.f32.s32 s4, s4",
    "vcvt.f32.s32 s5, s5",
    "vcvt.f32.s32 s6, s6",
    "vcvt.f32.s32 s7, s7",
    "vmul.f32 s4, s4, s0",
    "vmul.f32 s5, s5, s0",
    "vmul.f32 s6, s6, s0",
    "vmul.f32 s7, s7, s0",
    "vstmia r0!, {{s4-s7}}",
    "subs r2, r2, #1",
    "bne 1b",
    "2:",
    "ands r1, r1, #3",
    "beq 4f",
    "3:",
    "vldr s4, [r0]",
    "vcvt.f32.s32 s4, s4",
    "vmul.f32 s4, s4, s0",
    "vstmia r0!, {{s4}}",
    "subs r1, r1, #1",
    "bne 3b",
    "4:",
    "bx lr",
    ".size microlens_mix_rescale, . - microlens_mix_rescale",
);
