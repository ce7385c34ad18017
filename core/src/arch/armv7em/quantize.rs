//! Per-token quantisation in assembly for cores with the DSP instructions and an FPU (Cortex-M4F,
//! M7, M33, M55): the operations of `activations::scale_of`, `nearest_bits` and `quantize_strided` in their
//! order, so the same bits as the portable Rust.
//!
//! - [`quantize8`], [`quantize16`]: a matmul input's or query's `max|x|` as the unsigned maximum of the values' bits
//!   shifted left once (per value `CMP` with the shift, `IT`, `LSL`, a quarter `LDMIA`), the scale and
//!   its inverse (two `VDIV`), then per four values one `VLDMIA`, four `VMUL` by the inverse, four
//!   `VADD` of `1.5 * 2^23`, two `VMOV` pairs, two `PKHBT` and one `STRD` (the 16-bit lanes, the low
//!   halves of the sums' bits) and for int8 the bytes from the lanes (two `AND`, an `ORR`, a `STR`).
//!   [`quantize8_i4`] writes the lanes in the int4 kernel's order instead (per eight values four
//!   `PKHBT`, one `STMIA`, and the bytes by `AND` and three `BFI` per four).
//! - [`heads8`]: the int8 KV cache's writes, per head the same maximum and scale, then per four
//!   values one `VLDMIA`, four `VMUL`, four `VADD`, two `VMOV` pairs and four `STRB` `stride` apart,
//!   all heads of a position in one call.
//!
//! Both take only vectors whose maximum is a normal float (no NaN, infinity, zero or subnormal: every
//! value then rounds within the range unsaturated) and leave the others to the portable Rust.
//! Functions in `global_asm!` with the C calling convention: they clobber only FPU `s0`-`s11` and
//! general registers their callers save (r4-r11 saved where used).
#![allow(unsafe_code)]

use crate::arch::{Int16Parts, Int8Parts};

/// [`activations::quantize`]'s result in one call of the assembly: when `x` is whole groups of four
/// (at least one) with a normal `max|x|` and `buf` is word-aligned with room for the values and
/// their lanes (`3 * x.len()` bytes); else `buf` back, untouched.
#[inline]
pub(crate) fn quantize8<'q>(
    x: &[f32],
    buf: &'q mut [i8],
    q_max: f32,
) -> Result<Int8Parts<'q>, &'q mut [i8]> {
    int8_lanes(x, buf, q_max, 4, microlens_quantize_lanes)
}

/// [`quantize8`] with the lanes in the int4 kernel's order (`int4_rows::arrange` of every eight
/// columns' int8 lanes: `[q0, q4]`, `[q1, q5]`, `[q2, q6]`, `[q3, q7]`), for `x` of whole groups of
/// eight; else `buf` back, untouched.
#[inline]
pub(crate) fn quantize8_i4<'q>(
    x: &[f32],
    buf: &'q mut [i8],
    q_max: f32,
) -> Result<Int8Parts<'q>, &'q mut [i8]> {
    int8_lanes(x, buf, q_max, 8, microlens_quantize_lanes4)
}

/// An assembly int8 quantiser with the C signature of [`microlens_quantize_lanes`] (values, whole
/// groups, lanes, bytes, `q_max`; the scale or -1 back).
type Int8Lanes = unsafe extern "C" fn(*const f32, usize, *mut u32, *mut i8, f32) -> f32;

/// [`quantize8`] through `lanes_of`, which takes `x` in groups of `whole` values (4 or 8).
#[inline(always)]
fn int8_lanes<'q>(
    x: &[f32],
    buf: &'q mut [i8],
    q_max: f32,
    whole: usize,
    lanes_of: Int8Lanes,
) -> Result<Int8Parts<'q>, &'q mut [i8]> {
    let n = x.len();
    let room = n.checked_mul(3).is_some_and(|b| b <= buf.len());
    if n % whole != 0 || n == 0 || !room || buf.as_ptr() as usize % 4 != 0 {
        return Err(buf);
    }
    let q = buf.as_mut_ptr();
    let lanes = q.wrapping_add(n).cast::<u32>();
    // SAFETY: `x` holds `n` word-aligned words; `buf` holds the `n` bytes at `q` and, word-aligned
    // (`buf` and `n` are), the `n / 2` words at `lanes`: what `lanes_of` writes for `n / whole`
    // groups (at least one).
    let scale = unsafe { lanes_of(x.as_ptr(), n / whole, lanes, q, q_max) };
    if scale < 0.0 {
        return Err(buf);
    }
    // SAFETY: as above; both regions lie within `buf`, whose borrow they take over, and do not
    // overlap.
    let (q, lanes) = unsafe {
        (
            core::slice::from_raw_parts(q.cast_const(), n),
            core::slice::from_raw_parts(lanes.cast_const(), n / 2),
        )
    };
    Ok((q, lanes, scale))
}

/// [`activations::quantize16`]'s result in one call of the assembly: when `x` is whole groups of
/// four (at least one) with a normal `max|x|` and `buf` is word-aligned with room for the values
/// (`2 * x.len()` bytes); else `buf` back, untouched.
#[inline]
pub(crate) fn quantize16<'q>(
    x: &[f32],
    buf: &'q mut [i8],
    q_max: f32,
) -> Result<Int16Parts<'q>, &'q mut [i8]> {
    let n = x.len();
    let room = n.checked_mul(2).is_some_and(|b| b <= buf.len());
    if n % 4 != 0 || n == 0 || !room || buf.as_ptr() as usize % 4 != 0 {
        return Err(buf);
    }
    let words = buf.as_mut_ptr().cast::<u32>();
    // SAFETY: `x` holds `n` word-aligned words, `buf` the `n / 2` word-aligned words at `words`.
    let scale =
        unsafe { microlens_quantize_lanes(x.as_ptr(), n / 4, words, core::ptr::null_mut(), q_max) };
    if scale < 0.0 {
        return Err(buf);
    }
    // SAFETY: as above; the words lie within `buf`, whose borrow they take over.
    let (lanes, values) = unsafe {
        (
            core::slice::from_raw_parts(words.cast_const(), n / 2),
            core::slice::from_raw_parts(words.cast_const().cast::<i16>(), n),
        )
    };
    Ok((lanes, values, scale))
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
    q_max: f32,
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
    let left = unsafe { microlens_kv_heads8(x.as_ptr(), &job, q_max) };
    heads - left.min(heads)
}

extern "C" {
    /// Safety: `job.groups > 0`, `job.heads > 0`; `x` points to `4 * groups * heads` word-aligned
    /// words; the value slots `q + k * stride` for `k < 4 * groups * heads` and the scales
    /// `scales + h * scale_step` (bytes) for `h < heads` are writable. Returns the heads left.
    fn microlens_kv_heads8(x: *const f32, job: *const Heads, q_max: f32) -> usize;

    /// Safety: `groups > 0`, `x` points to `4 * groups` word-aligned words, `words` to `2 * groups`
    /// writable ones, `bytes` is null or points to `4 * groups` writable bytes. Returns the scale, or
    /// `-1` (nothing written) for a maximum that is not a normal float.
    fn microlens_quantize_lanes(
        x: *const f32,
        groups: usize,
        words: *mut u32,
        bytes: *mut i8,
        q_max: f32,
    ) -> f32;
    /// Safety: `eights > 0`, `x` points to `8 * eights` word-aligned words, `words` to `4 * eights`
    /// writable ones, `bytes` to `8 * eights` writable bytes. Returns the scale, or `-1` (nothing
    /// written) for a maximum that is not a normal float.
    fn microlens_quantize_lanes4(
        x: *const f32,
        eights: usize,
        words: *mut u32,
        bytes: *mut i8,
        q_max: f32,
    ) -> f32;
}

/// `1.5 * 2^23` into `s1` (through `$r`).
macro_rules! magic {
    ($r:literal) => {
        concat!(
            "movw ",
            $r,
            ", #0\n",
            "movt ",
            $r,
            ", #0x4b40\n",
            "vmov s1, ",
            $r,
            "\n"
        )
    };
}

/// The largest key (bits shifted left once) of `$n` groups of four values from r0 (advanced past
/// them) into r12, two groups per pass (an odd one first), the pairs counted down in `$c`, r4-r7
/// clobbered; then r0 back at the first value and, unless the key's exponent field is neither 0 nor
/// 255, a branch to `$fail`; else `s2` the inverse `s0 / max` and `s3` the scale `max / s0` (`s0` is
/// `q_max`).
macro_rules! scale {
    ($n:literal, $c:literal, $fail:literal) => {
        concat!(
            "movs r12, #0\n",
            "lsrs ",
            $c,
            ", ",
            $n,
            ", #1\n",
            "bcc 7f\n",
            "ldmia r0!, {{r4-r7}}\n",
            top_shifted!("r4"),
            top_shifted!("r5"),
            top_shifted!("r6"),
            top_shifted!("r7"),
            "cmp ",
            $c,
            ", #0\n",
            "beq 6f\n",
            "7:\n",
            "ldmia r0!, {{r4-r7}}\n",
            top_shifted!("r4"),
            top_shifted!("r5"),
            top_shifted!("r6"),
            top_shifted!("r7"),
            "ldmia r0!, {{r4-r7}}\n",
            top_shifted!("r4"),
            top_shifted!("r5"),
            top_shifted!("r6"),
            top_shifted!("r7"),
            "subs ",
            $c,
            ", ",
            $c,
            ", #1\n",
            "bne 7b\n",
            "6:\n",
            "sub r0, r0, ",
            $n,
            ", lsl #4\n",
            "sub r4, r12, #0x01000000\n",
            "cmp r4, #0xfe000000\n",
            "bhs ",
            $fail,
            "\n",
            "lsrs r12, r12, #1\n",
            "vmov s2, r12\n",
            "vdiv.f32 s3, s2, s0\n",
            "vdiv.f32 s2, s0, s2\n",
        )
    };
}

/// Four values from r0 (advanced) times `s2` plus `s1` (`1.5 * 2^23`), their bits in r4-r7.
macro_rules! round4 {
    () => {
        concat!(
            "vldmia r0!, {{s4-s7}}\n",
            "vmul.f32 s4, s4, s2\n",
            "vmul.f32 s5, s5, s2\n",
            "vmul.f32 s6, s6, s2\n",
            "vmul.f32 s7, s7, s2\n",
            "vadd.f32 s4, s4, s1\n",
            "vadd.f32 s5, s5, s1\n",
            "vadd.f32 s6, s6, s1\n",
            "vadd.f32 s7, s7, s1\n",
            "vmov r4, r5, s4, s5\n",
            "vmov r6, r7, s6, s7\n",
        )
    };
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
// values then their rounding sums. Lanes: r0 the values read, r1 groups left, r2 the words written,
// r3 the bytes written (or 0), lr the groups, r4-r7 four values' bits then the lanes and bytes; s0-s7
// as for the heads.
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
    magic!("r4"),
    "1:",
    scale!("r8", "r9", "4f"),
    "vstr s3, [r11]",
    "add r11, r11, lr",
    "mov r9, r8",
    "3:",
    round4!(),
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
    ".section .text.microlens_quantize_lanes,\"ax\",%progbits",
    ".global microlens_quantize_lanes",
    ".type microlens_quantize_lanes,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_quantize_lanes:",
    "push {{r4-r7, lr}}",
    scale!("r1", "lr", "5f"),
    magic!("r4"),
    "cbz r3, 2f",
    "1:",
    round4!(),
    "pkhbt r4, r4, r6, lsl #16",
    "pkhbt r5, r5, r7, lsl #16",
    "strd r4, r5, [r2], #8",
    "and r4, r4, #0x00ff00ff",
    "and r5, r5, #0x00ff00ff",
    "orr r4, r4, r5, lsl #8",
    "str r4, [r3], #4",
    "subs r1, r1, #1",
    "bne 1b",
    "b 4f",
    "2:",
    round4!(),
    "pkhbt r4, r4, r6, lsl #16",
    "pkhbt r5, r5, r7, lsl #16",
    "strd r4, r5, [r2], #8",
    "subs r1, r1, #1",
    "bne 2b",
    "4:",
    "vmov.f32 s0, s3",
    "pop {{r4-r7, pc}}",
    "5:",
    "vmov.f32 s0, #-1.0",
    "pop {{r4-r7, pc}}",
    ".size microlens_quantize_lanes, . - microlens_quantize_lanes",
    ".section .text.microlens_quantize_lanes4,\"ax\",%progbits",
    ".global microlens_quantize_lanes4",
    ".type microlens_quantize_lanes4,%function",
    ".p2align 2",
    ".thumb_func",
    "microlens_quantize_lanes4:",
    "push {{r4-r11, lr}}",
    "lsls r1, r1, #1",
    scale!("r1", "lr", "5f"),
    magic!("r4"),
    "lsrs r1, r1, #1",
    "1:",
    "vldmia r0!, {{s4-s11}}",
    "vmul.f32 s4, s4, s2",
    "vmul.f32 s5, s5, s2",
    "vmul.f32 s6, s6, s2",
    "vmul.f32 s7, s7, s2",
    "vmul.f32 s8, s8, s2",
    "vmul.f32 s9, s9, s2",
    "vmul.f32 s10, s10, s2",
    "vmul.f32 s11, s11, s2",
    "vadd.f32 s4, s4, s1",
    "vadd.f32 s5, s5, s1",
    "vadd.f32 s6, s6, s1",
    "vadd.f32 s7, s7, s1",
    "vadd.f32 s8, s8, s1",
    "vadd.f32 s9, s9, s1",
    "vadd.f32 s10, s10, s1",
    "vadd.f32 s11, s11, s1",
    "vmov r4, r5, s4, s5",
    "vmov r6, r7, s6, s7",
    "vmov r8, r9, s8, s9",
    "vmov r10, r11, s10, s11",
    "and r12, r4, #0xff",
    "bfi r12, r5, #8, #8",
    "bfi r12, r6, #16, #8",
    "bfi r12, r7, #24, #8",
    "and lr, r8, #0xff",
    "bfi lr, r9, #8, #8",
    "bfi lr, r10, #16, #8",
    "bfi lr, r11, #24, #8",
    "strd r12, lr, [r3], #8",
    "pkhbt r4, r4, r8, lsl #16",
    "pkhbt r5, r5, r9, lsl #16",
    "pkhbt r6, r6, r10, lsl #16",
    "pkhbt r7, r7, r11, lsl #16",
    "stmia r2!, {{r4-r7}}",
    "subs r1, r1, #1",
    "bne 1b",
    "vmov.f32 s0, s3",
    "pop {{r4-r11, pc}}",
    "5:",
    "vmov.f32 s0, #-1.0",
    "pop {{r4-r11, pc}}",
    ".size microlens_quantize_lanes4, . - microlens_quantize_lanes4",
);
