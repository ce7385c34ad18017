//! The four-row int8 kernel for the blob's quads of rows on ARMv6-M (no `MLA`, no `SXTB16`, loads
//! with immediate offsets only unsigned): per group of four columns, each activation loaded once
//! from its lane (`LDRH`, `SXTH`) and met by the four rows' bytes (`LDRB`, `SXTB`, `MULS`, then `ADD`
//! into an accumulator kept in a high register): 76 instructions per 16 multiply-accumulates, 4.75
//! per MAC. The same wrapping `i32` sums as `dot4_quads_portable`'s `SMLAD` emulation (integer
//! addition in another order).
#![allow(unsafe_code)]

use core::arch::asm;

use crate::arch::portable::lanes::dot4_quads_by;

/// The facade's `dot4_quads` (four rows' sums per quad against the lanes), each quad by [`quad_sums`].
pub(crate) fn dot4_quads(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    dot4_quads_by(w, cols, lanes, out, quad_sums);
}

/// One column of a group: the activation at byte `lane` of the group's lanes against byte `col` of
/// each of the four rows' words, added into the four accumulators.
macro_rules! column {
    ($lane:literal, $col:literal) => {
        concat!(
            "ldrh {x}, [{lp}, #",
            $lane,
            "]\n",
            "sxth {x}, {x}\n",
            "ldrb {t}, [{wp}, #",
            $col,
            "]\n",
            "sxtb {t}, {t}\n",
            "muls {t}, {x}, {t}\n",
            "add r8, {t}\n",
            "ldrb {t}, [{wp}, #",
            $col,
            " + 4]\n",
            "sxtb {t}, {t}\n",
            "muls {t}, {x}, {t}\n",
            "add r10, {t}\n",
            "ldrb {t}, [{wp}, #",
            $col,
            " + 8]\n",
            "sxtb {t}, {t}\n",
            "muls {t}, {x}, {t}\n",
            "add r11, {t}\n",
            "ldrb {t}, [{wp}, #",
            $col,
            " + 12]\n",
            "sxtb {t}, {t}\n",
            "muls {t}, {x}, {t}\n",
            "add r12, {t}\n",
        )
    };
}

/// One quad's four sums over `groups` groups, or `None` when `quad` or `lanes` is short of them.
#[inline(always)]
fn quad_sums(quad: &[u8], lanes: &[u32], groups: usize) -> Option<[i32; 4]> {
    if groups == 0 || quad.len() / 16 < groups || lanes.len() / 2 < groups {
        return None;
    }
    let mut sums = [0i32; 4];
    // SAFETY: `groups > 0`, `quad` holds `16 * groups` bytes and `lanes` `2 * groups` words
    // (checked above); each pass reads one group's 16 bytes and 8 lane bytes, then steps both
    // pointers past them, `groups` passes; the sums (in high registers, clobbered) are stored to
    // `sums`, four words; nothing else is written but the named registers.
    unsafe {
        asm!(
            "movs {t}, #0",
            "mov r8, {t}",
            "mov r10, {t}",
            "mov r11, {t}",
            "mov r12, {t}",
            "2:",
            // Bytes 0 to 3 of each row's word meet lanes 0, 2, 1 and 3 (`SMLAD`'s pairing).
            column!("0", "0"),
            column!("4", "1"),
            column!("2", "2"),
            column!("6", "3"),
            "adds {wp}, #16",
            "adds {lp}, #8",
            "subs {n}, #1",
            "bne 2b",
            "mov {t}, r8",
            "str {t}, [{p}]",
            "mov {t}, r10",
            "str {t}, [{p}, #4]",
            "mov {t}, r11",
            "str {t}, [{p}, #8]",
            "mov {t}, r12",
            "str {t}, [{p}, #12]",
            x = out(reg) _,
            t = out(reg) _,
            lp = inout(reg) lanes.as_ptr() => _,
            wp = inout(reg) quad.as_ptr() => _,
            n = inout(reg) groups => _,
            p = in(reg) sums.as_mut_ptr(),
            out("r8") _,
            out("r10") _,
            out("r11") _,
            out("r12") _,
            options(nostack),
        );
    }
    Some(sums)
}
