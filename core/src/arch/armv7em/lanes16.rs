//! The int16 KV cache's dot products in assembly for cores with the DSP instructions and an FPU
//! (Cortex-M4F, M7, M33, M55): quads of rows of 16-bit lanes, `stride` words apart (four keys, or
//! four outputs of the mix), against one vector of words (the query's, or the mix's packed weights),
//! each load of a vector word shared by the four rows:
//!
//! - per vector word one `LDR` of it, four `LDR`s of the rows' words and four `SMLALD` into 64-bit
//!   sums, two words per pass of the loop, whose three (its end from the stack, `CMP`, `BNE`) make
//!   10.5 instructions per word per four rows (2.6 per word and row);
//! - each sum as `f32` with the steps of `sum_to_f32` (`portable/lanes.rs`): 5 instructions when it fits in
//!   `i32` (`CMP`, `BNE`, `VMOV`, `VCVT`, `B`), 26 when it does not;
//! - 26 per quad for the loops (zeroing the sums, the next quad's rows, `VSTMIA` of the four).
//!
//! A quad of keys of the shipped model (`d_head` 16, 8 words, sums in `i32`) is 130 instructions, 33
//! per key.
//! `cargo xtask profile` of `cargo xtask firmware --dtype i8 --activations i16 --kv i16` (M4F): the
//! int16 cache's scores and mix about 24 k instructions per token, against 51 k in the compiler's
//! one-key-at-a-time loops.
//!
//! A function in `global_asm!` with the C calling convention: it saves r4-r11 and lr and clobbers only
//! FPU `s0`-`s4` besides its arguments' registers and r12.
#![allow(unsafe_code)]

/// `out[4g + r] = sum_to_f32(dot(rows[(4g + r) * stride ..], v))` for `r < 4` and the first `quads`
/// quads `g` (`quads <= out.len() / 4`), each `dot(x, v) = sum_k lo(x_k) lo(v_k) + hi(x_k) hi(v_k)`
/// over the `v.len()` words of `v`, exact in `i64`, where `rows` holds at least
/// `(4 quads - 1) * stride + v.len()` words and `v.len() < 2^29` (so the sums stay below `2^62`),
/// returning `true`; else `false`, nothing written.
#[inline]
pub(crate) fn sums4_f32(
    rows: &[u32],
    stride: usize,
    v: &[u32],
    out: &mut [f32],
    quads: usize,
) -> bool {
    let need = quads
        .checked_mul(4)
        .and_then(|r| r.checked_sub(1))
        .and_then(|r| r.checked_mul(stride))
        .and_then(|r| r.checked_add(v.len()));
    let fits = need.is_some_and(|need| need <= rows.len());
    let Some(stride_bytes) = stride.checked_mul(4) else {
        return false;
    };
    if !fits || quads > out.len() / 4 || v.len() >= 1 << 29 {
        return false;
    }
    // SAFETY: the rows `rows[i * stride ..][.. v.len()]`, `i < 4 quads`, lie inside `rows` (checked
    // above), `v` holds `v.len()` words, all word-aligned (`u32` slices); `out` holds `4 quads`
    // writable words. The function reads only those words and writes only those of `out`.
    unsafe {
        microlens_sums4_lanes16(
            rows.as_ptr(),
            stride_bytes,
            v.as_ptr(),
            v.len(),
            out.as_mut_ptr(),
            quads,
        );
    }
    true
}

extern "C" {
    /// Safety: `quads > 0`; `rows + i * stride_bytes` for `i < 4 quads` each points to `words`
    /// readable aligned words, `v` to `words` readable aligned words (`words < 2^29`), `out` to
    /// `4 quads` writable `f32`.
    fn microlens_sums4_lanes16(
        rows: *const u32,
        stride_bytes: usize,
        v: *const u32,
        words: usize,
        out: *mut f32,
        quads: usize,
    );
}

/// The `i64` sum in registers `lo`, `hi` as `f32` into `s`, as `sum_to_f32`: `VCVT` when it fits in
/// `i32`; else its magnitude `m` (`2^31 <= m < 2^62`), `shift = 33 - clz(hi)` (1 to 32), the kept
/// bits `m >> shift` with the bits shifted out folded into the lowest, converted, times
/// `2^shift` (s4) and negated for a negative sum. Uses r3, r12, lr; `$a`, `$b` local label numbers.
macro_rules! to_f32 {
    ($lo:literal, $hi:literal, $s:literal, $a:literal, $b:literal) => {
        concat!(
            "cmp ",
            $hi,
            ", ",
            $lo,
            ", asr #31\n",
            "bne ",
            $a,
            "f\n",
            "vmov ",
            $s,
            ", ",
            $lo,
            "\n",
            "vcvt.f32.s32 ",
            $s,
            ", ",
            $s,
            "\n",
            "b ",
            $b,
            "f\n",
            $a,
            ":\n",
            "asrs r3, ",
            $hi,
            ", #31\n",
            "eors ",
            $lo,
            ", ",
            $lo,
            ", r3\n",
            "eors ",
            $hi,
            ", ",
            $hi,
            ", r3\n",
            "subs ",
            $lo,
            ", ",
            $lo,
            ", r3\n",
            "sbc ",
            $hi,
            ", ",
            $hi,
            ", r3\n",
            "clz r12, ",
            $hi,
            "\n",
            "rsb r12, r12, #33\n",
            "rsb lr, r12, #32\n",
            "lsl ",
            $hi,
            ", ",
            $hi,
            ", lr\n",
            "lsl lr, ",
            $lo,
            ", lr\n",
            "lsr ",
            $lo,
            ", ",
            $lo,
            ", r12\n",
            "orr ",
            $lo,
            ", ",
            $lo,
            ", ",
            $hi,
            "\n",
            "cmp lr, #0\n",
            "it ne\n",
            "orrne ",
            $lo,
            ", ",
            $lo,
            ", #1\n",
            "vmov ",
            $s,
            ", ",
            $lo,
            "\n",
            "vcvt.f32.s32 ",
            $s,
            ", ",
            $s,
            "\n",
            "add r12, r12, #127\n",
            "lsl r12, r12, #23\n",
            "vmov s4, r12\n",
            "vmul.f32 ",
            $s,
            ", ",
            $s,
            ", s4\n",
            "cmp r3, #0\n",
            "it ne\n",
            "vnegne.f32 ",
            $s,
            ", ",
            $s,
            "\n",
            $b,
            ":\n",
        )
    };
}

/// One vector word (r12) times the four rows' words (each in lr), the pointers on by a word.
macro_rules! word {
    () => {
        concat!(
            "ldr r12, [r2], #4\n",
            "ldr lr, [r0, r1]\n",
            "smlald r6, r7, lr, r12\n",
            "ldr lr, [r0], #4\n",
            "smlald r4, r5, lr, r12\n",
            "ldr lr, [r3, r1]\n",
            "smlald r10, r11, lr, r12\n",
            "ldr lr, [r3], #4\n",
            "smlald r8, r9, lr, r12\n",
        )
    };
}

// r0 row 0 of the quad (advancing), r3 its row 2 (advancing), r1 the stride in bytes (rows 1 and 3 at
// r0 + r1, r3 + r1), r2 the vector (advancing); [sp] the vector's end, [sp, #4] its start, [sp, #44]
// `out` (advancing), [sp, #48] the quads left (the fifth and sixth arguments); r12 a vector word, lr
// a row word; r4:r5, r6:r7, r8:r9, r10:r11 the four sums (low, high), then s0-s3 as `f32`.
core::arch::global_asm!(
    ".syntax unified",
    ".thumb",
    ".arch armv7e-m",
    ".fpu fpv4-sp-d16",
    ".section .text.microlens_sums4_lanes16,\"ax\",%progbits",
    ".global microlens_sums4_lanes16",
    ".type microlens_sums4_lanes16,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_sums4_lanes16:",
    "push {{r4-r11, lr}}",
    "sub sp, sp, #8",
    "add r3, r2, r3, lsl #2",
    "str r3, [sp]",
    "str r2, [sp, #4]",
    "0:",
    "add r3, r0, r1, lsl #1",
    "movs r4, #0",
    "movs r5, #0",
    "movs r6, #0",
    "movs r7, #0",
    "movs r8, #0",
    "movs r9, #0",
    "movs r10, #0",
    "movs r11, #0",
    "ldr lr, [sp]",
    "subs lr, lr, r2",
    "beq 2f",
    // An odd count of words: in at the second word of the pair.
    "tst lr, #4",
    "bne 11f",
    "1:",
    word!(),
    "11:",
    word!(),
    "ldr lr, [sp]",
    "cmp r2, lr",
    "bne 1b",
    "2:",
    // The next quad's row 0: back by the vector's bytes, on by four strides; the vector from its start.
    "ldr r12, [sp, #4]",
    "subs r2, r2, r12",
    "sub r0, r0, r2",
    "add r0, r0, r1, lsl #2",
    "mov r2, r12",
    to_f32!("r4", "r5", "s0", "3", "4"),
    to_f32!("r6", "r7", "s1", "5", "6"),
    to_f32!("r8", "r9", "s2", "7", "8"),
    to_f32!("r10", "r11", "s3", "9", "10"),
    "ldr r12, [sp, #44]",
    "vstmia r12!, {{s0-s3}}",
    "str r12, [sp, #44]",
    "ldr r12, [sp, #48]",
    "subs r12, r12, #1",
    "str r12, [sp, #48]",
    "bne 0b",
    "add sp, sp, #8",
    "pop {{r4-r11, pc}}",
    ".size microlens_sums4_lanes16, . - microlens_sums4_lanes16",
);
