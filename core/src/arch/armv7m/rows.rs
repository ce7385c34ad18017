//! The four-row int8 kernel for the blob's quads of rows on ARMv7-M without `SXTB16`/`SMLAD`: per
//! group of four columns, each activation loaded once as a signed halfword from its lane (`LDRSH`)
//! and met by the four rows' bytes (`LDRSB` with an immediate offset, then `MLA`): 38 instructions per
//! 16 multiply-accumulates, 2.375 per MAC. The same wrapping `i32` sums as
//! `dot4_quads_portable`'s `SMLAD` emulation (integer addition in another order).
#![allow(unsafe_code)]

use core::arch::asm;

use crate::arch::portable::lanes::dot4_quads_by;

/// The facade's `dot4_quads` (four rows' sums per quad against the lanes), each quad by [`quad_sums`].
pub(crate) fn dot4_quads(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    dot4_quads_by(w, cols, lanes, out, quad_sums);
}

/// One quad's four sums over `groups` groups, or `None` when `quad` or `lanes` is short of them.
#[inline(always)]
fn quad_sums(quad: &[u8], lanes: &[u32], groups: usize) -> Option<[i32; 4]> {
    if groups == 0 || quad.len() / 16 < groups || lanes.len() / 2 < groups {
        return None;
    }
    let [mut a0, mut a1, mut a2, mut a3] = [0i32; 4];
    // SAFETY: `groups > 0`, `quad` holds `16 * groups` bytes and `lanes` `2 * groups` words
    // (checked above); each pass reads one group's 16 bytes and 8 lane bytes, then steps both
    // pointers past them, `groups` passes; nothing is written but the named registers.
    unsafe {
        asm!(
            "2:",
            // Column 3 of the group: the high lane of the second word.
            "ldrsh {x}, [{lp}, #6]",
            "ldrsb {t}, [{wp}, #3]",
            "mla {a0}, {t}, {x}, {a0}",
            "ldrsb {t}, [{wp}, #7]",
            "mla {a1}, {t}, {x}, {a1}",
            "ldrsb {t}, [{wp}, #11]",
            "mla {a2}, {t}, {x}, {a2}",
            "ldrsb {t}, [{wp}, #15]",
            "mla {a3}, {t}, {x}, {a3}",
            // Column 2: the high lane of the first word.
            "ldrsh {x}, [{lp}, #2]",
            "ldrsb {t}, [{wp}, #2]",
            "mla {a0}, {t}, {x}, {a0}",
            "ldrsb {t}, [{wp}, #6]",
            "mla {a1}, {t}, {x}, {a1}",
            "ldrsb {t}, [{wp}, #10]",
            "mla {a2}, {t}, {x}, {a2}",
            "ldrsb {t}, [{wp}, #14]",
            "mla {a3}, {t}, {x}, {a3}",
            // Column 1: the low lane of the second word.
            "ldrsh {x}, [{lp}, #4]",
            "ldrsb {t}, [{wp}, #1]",
            "mla {a0}, {t}, {x}, {a0}",
            "ldrsb {t}, [{wp}, #5]",
            "mla {a1}, {t}, {x}, {a1}",
            "ldrsb {t}, [{wp}, #9]",
            "mla {a2}, {t}, {x}, {a2}",
            "ldrsb {t}, [{wp}, #13]",
            "mla {a3}, {t}, {x}, {a3}",
            // Column 0: the low lane of the first word; the last loads step to the next group.
            "ldrsh {x}, [{lp}], #8",
            "ldrsb {t}, [{wp}, #4]",
            "mla {a1}, {t}, {x}, {a1}",
            "ldrsb {t}, [{wp}, #8]",
            "mla {a2}, {t}, {x}, {a2}",
            "ldrsb {t}, [{wp}, #12]",
            "mla {a3}, {t}, {x}, {a3}",
            "ldrsb {t}, [{wp}], #16",
            "mla {a0}, {t}, {x}, {a0}",
            "subs {n}, {n}, #1",
            "bne 2b",
            x = out(reg) _,
            t = out(reg) _,
            lp = inout(reg) lanes.as_ptr() => _,
            wp = inout(reg) quad.as_ptr() => _,
            n = inout(reg) groups => _,
            a0 = inout(reg) a0,
            a1 = inout(reg) a1,
            a2 = inout(reg) a2,
            a3 = inout(reg) a3,
            options(nostack, readonly),
        );
    }
    Some([a0, a1, a2, a3])
}
