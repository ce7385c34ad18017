//! The four-row float sums of `math::rows` as one `asm!` loop per dtype: per group of four columns one `VLDMIA` of `x`
//! (`s0-s3`) and one per row (`s4-s7`, `s8-s11`, `s12-s15`, `s16-s19`; for `f16` two words per row,
//! widened in place by `VCVTB`/`VCVTT`), then 16 `VMLA.F32` into `s20-s23`, row by row in column order.
#![allow(unsafe_code)]

/// The 16 multiply-accumulates of a group: column `k` of row `r` (`s(4 + 4r + k)`) times `x_k`
/// (`s(k)`) into `s(20 + r)`, columns in order for each row.
macro_rules! vmla16 {
    () => {
        concat!(
            "vmla.f32 s20, s4, s0\n",
            "vmla.f32 s21, s8, s0\n",
            "vmla.f32 s22, s12, s0\n",
            "vmla.f32 s23, s16, s0\n",
            "vmla.f32 s20, s5, s1\n",
            "vmla.f32 s21, s9, s1\n",
            "vmla.f32 s22, s13, s1\n",
            "vmla.f32 s23, s17, s1\n",
            "vmla.f32 s20, s6, s2\n",
            "vmla.f32 s21, s10, s2\n",
            "vmla.f32 s22, s14, s2\n",
            "vmla.f32 s23, s18, s2\n",
            "vmla.f32 s20, s7, s3\n",
            "vmla.f32 s21, s11, s3\n",
            "vmla.f32 s22, s15, s3\n",
            "vmla.f32 s23, s19, s3\n",
        )
    };
}

/// One group of four columns of `f32` rows: `x` into `s0-s3`, the rows into `s4-s19`, then
/// [`vmla16`].
macro_rules! group_f32 {
    () => {
        concat!(
            "vldmia {px}!, {{s0-s3}}\n",
            "vldmia {p0}!, {{s4-s7}}\n",
            "vldmia {p1}!, {{s8-s11}}\n",
            "vldmia {p2}!, {{s12-s15}}\n",
            "vldmia {p3}!, {{s16-s19}}\n",
            vmla16!(),
        )
    };
}

/// One group of four columns of `f16` rows: two words per row, widened in place, then [`vmla16`].
macro_rules! group_f16 {
    () => {
        concat!(
            "vldmia {px}!, {{s0-s3}}\n",
            "vldmia {p0}!, {{s4-s5}}\n",
            "vldmia {p1}!, {{s8-s9}}\n",
            "vldmia {p2}!, {{s12-s13}}\n",
            "vldmia {p3}!, {{s16-s17}}\n",
            "vcvtt.f32.f16 s7, s5\n",
            "vcvtb.f32.f16 s6, s5\n",
            "vcvtt.f32.f16 s5, s4\n",
            "vcvtb.f32.f16 s4, s4\n",
            "vcvtt.f32.f16 s11, s9\n",
            "vcvtb.f32.f16 s10, s9\n",
            "vcvtt.f32.f16 s9, s8\n",
            "vcvtb.f32.f16 s8, s8\n",
            "vcvtt.f32.f16 s15, s13\n",
            "vcvtb.f32.f16 s14, s13\n",
            "vcvtt.f32.f16 s13, s12\n",
            "vcvtb.f32.f16 s12, s12\n",
            "vcvtt.f32.f16 s19, s17\n",
            "vcvtb.f32.f16 s18, s17\n",
            "vcvtt.f32.f16 s17, s16\n",
            "vcvtb.f32.f16 s16, s16\n",
            vmla16!(),
        )
    };
}

/// Whether four rows of `items` items, `stride` apart, lie within `len` items.
#[inline(always)]
fn whole(len: usize, stride: usize, items: usize) -> bool {
    stride
        .checked_mul(3)
        .and_then(|s| s.checked_add(items))
        .is_some_and(|end| end <= len)
}

/// The starts of the four rows `stride` apart in `block` (in bounds: checked by [`whole`]).
#[inline(always)]
fn row_pointers<T>(block: &[T], stride: usize) -> [*const T; 4] {
    let p = block.as_ptr();
    [0, 1, 2, 3].map(|k| p.wrapping_add(k * stride))
}

/// The sums of the four rows `stride` apart from the start of `block` over the `x.len() / 4`
/// whole groups of `x` (zeros unless all four rows are that long within `block`).
#[inline(always)]
pub(crate) fn f32(block: &[f32], stride: usize, x: &[f32]) -> [f32; 4] {
    let groups = x.len() / 4;
    let mut acc = [0.0f32; 4];
    if groups == 0 || !whole(block.len(), stride, 4 * groups) {
        return acc;
    }
    let rows = row_pointers(block, stride);
    // SAFETY: the loop reads `4 * groups` values from each of `x` and the four rows (checked
    // above to lie within `block`: the last ends at `3 * stride + 4 * groups`; `VLDMIA` needs
    // word alignment, which `&[f32]` has) over `groups > 0` groups, two per iteration (an odd
    // count enters at the second; the test of `px` against the end follows them); it reads and writes the four words of
    // `acc`, saves the FPU registers it uses (`s0-s23`, 96 bytes of stack) and restores them, and
    // changes the flags. (`sreg` operands would need the `vfp2` target feature, which a
    // single-precision FPU lacks.)
    unsafe {
        core::arch::asm!(
            "vpush {{s0-s23}}",
            "vldmia {acc}, {{s20-s23}}",
            // Two groups per iteration; an odd count enters at the second (`end` holds
            // `16 * groups` until it becomes the end of `x`).
            "tst {end}, #16",
            "add {end}, {px}, {end}",
            "bne 3f",
            "2:",
            group_f32!(),
            "3:",
            group_f32!(),
            "cmp {px}, {end}",
            "bne 2b",
            "vstmia {acc}, {{s20-s23}}",
            "vpop {{s0-s23}}",
            px = inout(reg) x.as_ptr() => _,
            end = inout(reg) 16 * groups => _,
            p0 = inout(reg) rows[0] => _,
            p1 = inout(reg) rows[1] => _,
            p2 = inout(reg) rows[2] => _,
            p3 = inout(reg) rows[3] => _,
            acc = in(reg) acc.as_mut_ptr(),
        );
    }
    acc
}

/// [`f32`] of `f16` rows, two values per word (the low half first).
#[inline(always)]
pub(crate) fn f16(block: &[u32], stride: usize, x: &[f32]) -> [f32; 4] {
    let groups = x.len() / 4;
    let mut acc = [0.0f32; 4];
    if groups == 0 || !whole(block.len(), stride, 2 * groups) {
        return acc;
    }
    let rows = row_pointers(block, stride);
    // SAFETY: as in `f32`: `4 * groups` values of `x` and `2 * groups` words of each row, all
    // checked to be there and word-aligned; `acc` read and written, `s0-s23` saved and restored,
    // flags changed. `VCVTB`/`VCVTT`
    // widen exactly (FPSCR's AHP, DN and FZ at their reset value 0: as `half`, NaNs quieted).
    unsafe {
        core::arch::asm!(
            "vpush {{s0-s23}}",
            "vldmia {acc}, {{s20-s23}}",
            // Two groups per iteration; an odd count enters at the second (`end` holds
            // `16 * groups` until it becomes the end of `x`).
            "tst {end}, #16",
            "add {end}, {px}, {end}",
            "bne 3f",
            "2:",
            group_f16!(),
            "3:",
            group_f16!(),
            "cmp {px}, {end}",
            "bne 2b",
            "vstmia {acc}, {{s20-s23}}",
            "vpop {{s0-s23}}",
            px = inout(reg) x.as_ptr() => _,
            end = inout(reg) 16 * groups => _,
            p0 = inout(reg) rows[0] => _,
            p1 = inout(reg) rows[1] => _,
            p2 = inout(reg) rows[2] => _,
            p3 = inout(reg) rows[3] => _,
            acc = in(reg) acc.as_mut_ptr(),
        );
    }
    acc
}
