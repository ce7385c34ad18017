//! The four-row int8 kernels (`dot4_strided`, `dot4_quads`) on Helium (M-profile Vector Extension, Armv8.1-M:
//! Cortex-M55, M85): eight multiply-accumulates per instruction, `VMLADAVA.S16`, into the same `i32`
//! sums, so the same bits as the DSP and portable kernels.
//!
//! The lanes are 16-bit values in the DSP kernel's order (per group of four columns `[c0, c2]`, `[c1,
//! c3]`): one gather load (`VLDRH` with a vector of offsets) puts eight of them in column order. Then per
//! row one `VLDRB.S16` of eight weight bytes, sign-extended, and one `VMLADAVA.S16`: 11 instructions per
//! 32 multiply-accumulates for four rows. A last odd group of four columns is added with the DSP
//! kernel's `SMLAD` pairs. For an `I8` matrix in quads of rows (`dot4_quads`) the lanes load
//! contiguously (`VLDRH` with write-back) and each row's eight bytes are gathered in the lanes' order
//! (`VLDRB.S16` with a vector of offsets, one `VADD` per eight columns moving it on for the four
//! rows): 11 instructions per 32 multiply-accumulates too. Enabled by the feature `mve`, which asserts the core has Helium (built with
//! `-C target-cpu=cortex-m55` or another MVE core); the only `unsafe` is the one `asm!` loop.
#![allow(unsafe_code)]

use crate::arch::{mac_lanes, word};

/// Byte offsets of columns 0 to 7 in two groups' lanes (`[c0, c2, c1, c3, c4, c6, c5, c7]` as 16-bit
/// values): the gather that puts them in column order.
static COLUMNS: [u16; 8] = [0, 4, 2, 6, 8, 12, 10, 14];

/// The four-row kernel (`dot4_strided`, whose sums it computes): for every row `r < out.len()` rounded down to a multiple of 4,
/// `out[r]` = row `r` (bytes `r * stride ..`) times the vector whose lanes are `lanes`, over the groups
/// of four columns the quad's shortest row has (at most `lanes.len() / 2`), wrapping.
#[inline(never)]
pub(crate) fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    let groups = lanes.len() / 2;
    for (q, sums) in out.chunks_exact_mut(4).enumerate() {
        let start = |k: usize| (4 * q + k).saturating_mul(stride);
        let words = |k: usize| rows.len().saturating_sub(start(k)) / 4;
        let quad_groups = groups.min((0..4).map(words).min().unwrap_or(0));
        let blocks = quad_groups / 2;
        let starts = [start(0), start(1), start(2), start(3)];
        let (mut acc, done) = match blocks8(rows, starts, lanes, blocks) {
            Some(acc) => (acc, 2 * blocks),
            None => ([0; 4], 0),
        };
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

/// Offsets of one row's eight bytes of two groups of a quad in the lanes' order (`[c0, c2, c1, c3]`
/// per group; the group's other rows' words are 4, 8, 12 bytes on).
static QUAD_COLUMNS: [u16; 8] = [0, 2, 1, 3, 16, 18, 17, 19];

/// The quads kernel (`dot4_quads`, whose sums it computes): per quad of rows, its groups in pairs on
/// Helium ([`quads8`]), a last odd group with the DSP kernel's `SMLAD` pairs.
#[inline(never)]
pub(crate) fn dot4_quads(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    let groups = (lanes.len() / 2).min(cols / 4);
    for (sums, quad) in out
        .chunks_exact_mut(4)
        .zip(crate::blob::quads::quads_of(w, cols))
    {
        let quad_groups = groups.min(quad.len() / 16);
        let blocks = quad_groups / 2;
        let (mut acc, done) = match quads8(quad, lanes, blocks) {
            Some(acc) => (acc, 2 * blocks),
            None => ([0; 4], 0),
        };
        for g in done..quad_groups {
            let x = (lanes[2 * g], lanes[2 * g + 1]);
            for (k, a) in acc.iter_mut().enumerate() {
                *a = mac_lanes(*a, word(&quad[16 * g + 4 * k..]), x);
            }
        }
        sums.copy_from_slice(&acc);
    }
}

/// The sums of a quad's four rows (`quad`: its groups' 16 bytes each) over `blocks` pairs of groups,
/// or `None` unless `0 < blocks < 2048` (the offsets are 16-bit), `quad` has `32 * blocks` bytes and
/// `lanes` at least `4 * blocks` words.
#[inline(always)]
fn quads8(quad: &[u8], lanes: &[u32], blocks: usize) -> Option<[i32; 4]> {
    if blocks == 0 || blocks >= 2048 || 32 * blocks > quad.len() || 4 * blocks > lanes.len() {
        return None;
    }
    let p = quad.as_ptr();
    let (mut a0, mut a1, mut a2) = (0i32, 0i32, 0i32);
    let a3: i32;
    // SAFETY: bounds checked above: per pair of groups the loop reads 8 halfwords of `lanes`
    // (`VLDRH`, halfword-aligned, `4 * blocks <= lanes.len()` words in all) and from each row's base
    // (`quad + 4k`, k < 4) the bytes at the offsets `QUAD_COLUMNS + 32 b` (b < blocks; the largest,
    // `32 * blocks - 1` from `quad`, within `quad`; below 2^16, as the gather's 16-bit offsets must
    // be); before the loop the eight halfwords of `QUAD_COLUMNS`. It runs exactly `blocks > 0` times
    // (`DLS`/`LE` on `lr`). It uses only q0-q3, caller-saved under the C ABI and declared clobbered
    // with it, writes no memory and touches neither the stack nor the flags. `VMLADAVA` takes only
    // even registers as its sum (r8, r10, r12 and r4, which first holds `QUAD_COLUMNS`).
    unsafe {
        core::arch::asm!(
            "vldrh.u16 q3, [r4]",
            "mov.w r4, #32",
            "vdup.16 q1, r4",
            "mov.w r4, #0",
            "dls lr, lr",
            "2:",
            "vldrh.u16 q0, [r5], #16",
            "vldrb.s16 q2, [r0, q3]",
            "vmladava.s16 r8, q2, q0",
            "vldrb.s16 q2, [r1, q3]",
            "vmladava.s16 r10, q2, q0",
            "vldrb.s16 q2, [r2, q3]",
            "vmladava.s16 r12, q2, q0",
            "vldrb.s16 q2, [r3, q3]",
            "vmladava.s16 r4, q2, q0",
            "vadd.i16 q3, q3, q1",
            "le lr, 2b",
            inout("r5") lanes.as_ptr() => _,
            inout("r0") p => _,
            inout("r1") p.wrapping_add(4) => _,
            inout("r2") p.wrapping_add(8) => _,
            inout("r3") p.wrapping_add(12) => _,
            inout("r8") a0,
            inout("r10") a1,
            inout("r12") a2,
            inout("r4") QUAD_COLUMNS.as_ptr() => a3,
            inout("lr") blocks => _,
            clobber_abi("C"),
            options(nostack, readonly, preserves_flags),
        );
    }
    Some([a0, a1, a2, a3])
}

/// The sums of four rows starting at `starts` in `rows` over `blocks` blocks of eight columns, or
/// `None` unless `blocks > 0`, every row has `8 * blocks` bytes and `lanes` at least `4 * blocks` words.
#[inline(always)]
fn blocks8(rows: &[u8], starts: [usize; 4], lanes: &[u32], blocks: usize) -> Option<[i32; 4]> {
    let end = starts.iter().max()?.checked_add(blocks.checked_mul(8)?)?;
    if blocks == 0 || end > rows.len() || blocks.checked_mul(4)? > lanes.len() {
        return None;
    }
    let p = starts.map(|s| rows.as_ptr().wrapping_add(s));
    let (mut a0, mut a1, mut a2) = (0i32, 0i32, 0i32);
    let a3: i32;
    // SAFETY: bounds checked above: per block the loop reads eight bytes of each row (`VLDRB.S16`, any
    // alignment), all within `rows` (the furthest row ends at `end <= rows.len()`), and four words of
    // `lanes` (the gather's halfwords, at even offsets below 16 from a word-aligned address),
    // `4 * blocks <= lanes.len()` in all; before the loop it reads the eight halfwords of `COLUMNS`. It
    // runs exactly `blocks > 0` times (`DLS`/`LE` on `lr`). It uses only q0-q2, caller-saved under the C
    // ABI and declared clobbered with it, writes no memory and touches neither the stack nor the flags
    // (`MOV.W` without `S`). Registers: `VLDRB.S16` takes only r0-r7 as its base (the rows: r0-r3),
    // `VMLADAVA` only even registers as its sum (r8, r10, r12 and r4, which first holds `COLUMNS`), the
    // lanes in r5; `clobber_abi` wants explicit registers for every output.
    unsafe {
        core::arch::asm!(
            "vldrh.u16 q1, [r4]",
            "mov.w r4, #0",
            "dls lr, lr",
            "2:",
            "vldrh.u16 q0, [r5, q1]",
            "add.w r5, r5, #16",
            "vldrb.s16 q2, [r0], #8",
            "vmladava.s16 r8, q2, q0",
            "vldrb.s16 q2, [r1], #8",
            "vmladava.s16 r10, q2, q0",
            "vldrb.s16 q2, [r2], #8",
            "vmladava.s16 r12, q2, q0",
            "vldrb.s16 q2, [r3], #8",
            "vmladava.s16 r4, q2, q0",
            "le lr, 2b",
            inout("r5") lanes.as_ptr() => _,
            inout("r0") p[0] => _,
            inout("r1") p[1] => _,
            inout("r2") p[2] => _,
            inout("r3") p[3] => _,
            inout("r8") a0,
            inout("r10") a1,
            inout("r12") a2,
            inout("r4") COLUMNS.as_ptr() => a3,
            inout("lr") blocks => _,
            clobber_abi("C"),
            options(nostack, readonly, preserves_flags),
        );
    }
    Some([a0, a1, a2, a3])
}
