//! [`dsp::dot4_strided`](super::dsp::dot4_strided) on Helium (M-profile Vector Extension, Armv8.1-M:
//! Cortex-M55, M85): sixteen int8 multiply-accumulates per instruction, `VMLADAVA.S8`, into the same
//! `i32` sums, so the same bits as the DSP and portable kernels.
//!
//! The lanes hold the vector as the DSP kernel wants it (per group of four columns `[x0, x2]`, `[x1,
//! x3]`, sign-extended to 16 bits): `VLD20`/`VLD21` de-interleave eight of their words into the even and
//! the odd columns, and `VMOVNB`/`VMOVNT` narrow those back into sixteen int8 columns in order. Then per
//! row one `VLDRB` of sixteen weight bytes and one `VMLADAVA.S8`: 13 instructions per 64
//! multiply-accumulates for four rows. Columns beyond the last multiple of sixteen are added with the
//! DSP kernel's `SMLAD` pairs. Enabled by the feature `mve`, which asserts the core has Helium (built
//! with `-C target-cpu=cortex-m55` or another MVE core); the only `unsafe` is the one `asm!` loop.
#![allow(unsafe_code)]

use super::int8::{mac_lanes, word};

/// As [`super::dsp::dot4_strided`]: for every row `r < out.len()` rounded down to a multiple of 4,
/// `out[r]` = row `r` (bytes `r * stride ..`) times the vector whose lanes are `lanes`, over the groups
/// of four columns the quad's shortest row has (at most `lanes.len() / 2`), wrapping.
pub fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    let groups = lanes.len() / 2;
    for (q, sums) in out.chunks_exact_mut(4).enumerate() {
        let start = |k: usize| (4 * q + k).saturating_mul(stride);
        let words = |k: usize| rows.len().saturating_sub(start(k)) / 4;
        let quad_groups = groups.min((0..4).map(words).min().unwrap_or(0));
        let blocks = quad_groups / 4;
        let starts = [start(0), start(1), start(2), start(3)];
        let (acc, done) = match blocks16(rows, starts, lanes, blocks) {
            Some(acc) => (acc, 4 * blocks),
            None => ([0; 4], 0),
        };
        let mut acc = acc;
        for g in done..quad_groups {
            let x = (lanes[2 * g], lanes[2 * g + 1]);
            for (k, a) in acc.iter_mut().enumerate() {
                let at = start(k) + 4 * g;
                *a = mac_lanes(*a, word(&rows[at..at + 4]), x);
            }
        }
        sums.copy_from_slice(&acc);
    }
}

/// The sums of four rows starting at `starts` in `rows` over `blocks` blocks of sixteen columns, or
/// `None` unless `blocks > 0`, every row has `16 * blocks` bytes and `lanes` at least `8 * blocks` words.
#[inline(never)]
fn blocks16(rows: &[u8], starts: [usize; 4], lanes: &[u32], blocks: usize) -> Option<[i32; 4]> {
    let end = starts.iter().max()?.checked_add(blocks.checked_mul(16)?)?;
    if blocks == 0 || end > rows.len() || blocks.checked_mul(8)? > lanes.len() {
        return None;
    }
    let p = starts.map(|s| rows.as_ptr().wrapping_add(s));
    let (mut a0, mut a1, mut a2, mut a3) = (0i32, 0i32, 0i32, 0i32);
    // SAFETY: bounds checked above: per block the loop reads sixteen bytes of each row (`VLDRB.U8`,
    // any alignment), all within `rows` (the furthest row ends at `end <= rows.len()`), and eight words
    // of `lanes` (`VLD20`/`VLD21`, word-aligned as a `&[u32]` is), `8 * blocks <= lanes.len()` in all.
    // It runs exactly `blocks > 0` times (`DLS`/`LE` on `lr`). It uses only q0-q3, caller-saved under
    // the C ABI and declared clobbered with it, writes no memory and touches neither the stack nor the
    // flags. `VMLADAVA` needs even accumulator registers, hence r0, r2, r4, r8.
    unsafe {
        core::arch::asm!(
            "dls lr, lr",
            "2:",
            "vld20.32 {{q0, q1}}, [{xp}]",
            "vld21.32 {{q0, q1}}, [{xp}]!",
            "vmovnb.i16 q2, q0",
            "vmovnt.i16 q2, q1",
            "vldrb.u8 q3, [{p0}], #16",
            "vmladava.s8 r0, q3, q2",
            "vldrb.u8 q3, [{p1}], #16",
            "vmladava.s8 r2, q3, q2",
            "vldrb.u8 q3, [{p2}], #16",
            "vmladava.s8 r4, q3, q2",
            "vldrb.u8 q3, [{p3}], #16",
            "vmladava.s8 r8, q3, q2",
            "le lr, 2b",
            xp = inout(reg) lanes.as_ptr() => _,
            p0 = inout(reg) p[0] => _,
            p1 = inout(reg) p[1] => _,
            p2 = inout(reg) p[2] => _,
            p3 = inout(reg) p[3] => _,
            inout("r0") a0,
            inout("r2") a1,
            inout("r4") a2,
            inout("r8") a3,
            inout("lr") blocks => _,
            clobber_abi("C"),
            options(nostack, readonly, preserves_flags),
        );
    }
    Some([a0, a1, a2, a3])
}
