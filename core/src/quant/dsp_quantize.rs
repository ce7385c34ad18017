//! The int16 activations' lanes in assembly for cores with the DSP instructions and an FPU
//! (Cortex-M4F, M7, M33): the same operations in the same order as the portable loop
//! (`activations::pack16`), so the same bits. Per four values one `VLDMIA`, four `VMUL` by the
//! inverse scale, four `VADD` of `1.5 * 2^23`, two `VMOV` pairs, two `PKHBT` and one `STRD`: 16
//! instructions with the loop test where the compiler's loop took 24.
//!
//! The int8 KV cache's writes ([`heads8`]) likewise: per head `max|x|` as the unsigned maximum of the
//! values' bits shifted left once (per value `CMP` with the shift, `IT`, `LSL`, a quarter `LDMIA`),
//! the scale and its inverse (two `VDIV`), then per four values one `VLDMIA`, four `VMUL`, four
//! `VADD`, two `VMOV` pairs and four `STRB` `stride` apart: the operations of `scale8` and
//! `quantize_strided` in their order, all heads of a position in one call.
//!
//! Functions in `global_asm!` with the C calling convention: they clobber only FPU `s0`-`s7` and
//! general registers their callers save (r4-r11 saved where used).
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

/// What [`heads8`] hands the assembly, in the order of the registers it loads them into.
#[repr(C)]
struct Heads {
    /// The first head's first int8 value.
    q: *mut i8,
    /// Bytes between a head's consecutive values (and from a head's last value to the next's first).
    stride: usize,
    /// Groups of four values per head.
    groups: usize,
    /// Heads to write.
    heads: usize,
    /// The first head's scale.
    scales: *mut f32,
    /// Bytes between consecutive heads' scales.
    scale_step: usize,
}

/// For heads `h = 0, 1, ...` of `x` (`d_head` values each, `x.len() / d_head` heads): `scales[h *
/// scale_stride] = max|x_h| / 127` and `q[(h * d_head + i) * stride] = round(x_h[i] * (127 /
/// max|x_h|))` for `i < d_head`, what `scale8` and `quantize_strided` write, while `max|x_h|` is a
/// normal float (no NaN, infinity, zero or subnormal maximum, so no value needs the saturation).
/// Returns how many heads were written: all, or those before the first other one; none unless
/// `d_head` is whole groups of four, `x` whole heads and every slot in `q` and `scales`.
#[inline]
pub(crate) fn heads8(
    x: &[f32],
    d_head: usize,
    q: &mut [i8],
    stride: usize,
    scales: &mut [f32],
    scale_stride: usize,
) -> usize {
    let heads = x.len().checked_div(d_head).unwrap_or(0);
    let last_q = (x.len().wrapping_sub(1)).checked_mul(stride);
    let last_scale = heads.wrapping_sub(1).checked_mul(scale_stride);
    let fits = matches!(last_q, Some(l) if l < q.len())
        && matches!(last_scale, Some(l) if l < scales.len())
        && scale_stride.checked_mul(4).is_some()
        && stride.checked_mul(4).is_some();
    if d_head % 4 != 0 || heads == 0 || heads * d_head != x.len() || stride == 0 || !fits {
        return 0;
    }
    let job = Heads {
        q: q.as_mut_ptr(),
        stride,
        groups: d_head / 4,
        heads,
        scales: scales.as_mut_ptr(),
        scale_step: 4 * scale_stride,
    };
    // SAFETY: `x` holds `heads * d_head` word-aligned words; every value's slot
    // `(h * d_head + i) * stride <= (x.len() - 1) * stride` is within `q`, every head's scale
    // `h * scale_stride` within `scales` (checked above), and the byte steps do not overflow.
    let left = unsafe { microlens_kv_heads8(x.as_ptr(), &job, super::activations::Q_MAX) };
    heads - left.min(heads)
}

extern "C" {
    /// Safety: `job.groups > 0`, `job.heads > 0`; `x` points to `4 * groups * heads` word-aligned
    /// words; the value slots `q + k * stride` for `k < 4 * groups * heads` and the scales
    /// `scales + h * scale_step` (bytes) for `h < heads` are writable. Returns the heads left.
    fn microlens_kv_heads8(x: *const f32, job: *const Heads, q_max: f32) -> usize;

    /// Safety: `groups > 0`, `x` points to `4 * groups` word-aligned words, `words` to `2 * groups`
    /// writable ones.
    fn microlens_quantize16_lanes(x: *const f32, words: *mut u32, groups: usize, inv: f32);
}

/// One value's bits (`rx`) shifted left once into the unsigned maximum in r12.
macro_rules! top_shifted {
    ($r:literal) => {
        concat!(
            "cmp r12, ",
            $r,
            ", lsl #1\n",
            "it lo\n",
            "lsllo r12, ",
            $r,
            ", #1\n"
        )
    };
}

// KV heads: r0 the values read, r1 the bytes written, r2 the stride, r3 three strides, r8 groups per
// head, r9 groups left, r10 heads left, r11 the scale written, lr the scales' step, r12 the maximum's
// key, r4-r7 four values' bits; s0 `q_max`, s1 `1.5 * 2^23`, s2 the inverse, s3 the scale, s4-s7 four
// values then their rounding sums.
core::arch::global_asm!(
    ".syntax unified",
    ".thumb",
    ".arch armv7e-m",
    ".fpu fpv4-sp-d16",
    ".section .text.microlens_kv_heads8,\"ax\",%progbits",
    ".global microlens_kv_heads8",
    ".type microlens_kv_heads8,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_kv_heads8:",
    "push {{r4-r11, lr}}",
    "mov r12, r1",
    "ldm r12, {{r1, r2, r8, r10, r11, lr}}",
    "add r3, r2, r2, lsl #1",
    "movw r4, #0",
    "movt r4, #0x4b40",
    "vmov s1, r4",
    "1:",
    "movs r12, #0",
    "mov r9, r8",
    "2:",
    "ldmia r0!, {{r4-r7}}",
    top_shifted!("r4"),
    top_shifted!("r5"),
    top_shifted!("r6"),
    top_shifted!("r7"),
    "subs r9, r9, #1",
    "bne 2b",
    "sub r0, r0, r8, lsl #4",
    // A normal maximum: its key's exponent field neither 0 nor 255.
    "sub r4, r12, #0x01000000",
    "cmp r4, #0xfe000000",
    "bhs 4f",
    "lsrs r12, r12, #1",
    "vmov s2, r12",
    "vdiv.f32 s3, s2, s0",
    "vdiv.f32 s2, s0, s2",
    "vstr s3, [r11]",
    "add r11, r11, lr",
    "mov r9, r8",
    "3:",
    "vldmia r0!, {{s4-s7}}",
    "vmul.f32 s4, s4, s2",
    "vmul.f32 s5, s5, s2",
    "vmul.f32 s6, s6, s2",
    "vmul.f32 s7, s7, s2",
    "vadd.f32 s4, s4, s1",
    "vadd.f32 s5, s5, s1",
    "vadd.f32 s6, s6, s1",
    "vadd.f32 s7, s7, s1",
    "vmov r4, r5, s4, s5",
    "vmov r6, r7, s6, s7",
    "strb r4, [r1]",
    "strb r5, [r1, r2]",
    "strb r6, [r1, r2, lsl #1]",
    "strb r7, [r1, r3]",
    "add r1, r1, r2, lsl #2",
    "subs r9, r9, #1",
    "bne 3b",
    "subs r10, r10, #1",
    "bne 1b",
    "4:",
    "mov r0, r10",
    "pop {{r4-r11, pc}}",
    ".size microlens_kv_heads8, . - microlens_kv_heads8",
);

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
