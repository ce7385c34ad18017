//! The four-row int8 kernel for the blob's quads of rows on RV32IM: per group of four columns, each
//! activation loaded once from its lane (`LH`) and met by the four rows' bytes (`LB`, `MUL`, `ADD`):
//! 56 instructions per 16 multiply-accumulates, 3.5 per MAC. The same wrapping `i32` sums as
//! `dot4_quads_portable`'s `SMLAD` emulation (integer addition in another order).
#![allow(unsafe_code)]

use core::arch::asm;

use crate::arch::portable::lanes::dot4_quads_by;

/// The facade's `dot4_quads` (four rows' sums per quad against the lanes), each quad by [`quad_sums`].
pub(crate) fn dot4_quads(w: &[u8], cols: usize, lanes: &[u32], out: &mut [i32]) {
    dot4_quads_by(w, cols, lanes, out, quad_sums);
}

/// One column of a group: the activation at byte `lane` of the group's lanes against byte `col` of
/// each of the four rows' words, added into the four sums.
macro_rules! column {
    ($lane:literal, $col:literal) => {
        concat!(
            "lh {x}, ",
            $lane,
            "({lp})\n",
            "lb {t}, ",
            $col,
            "({wp})\n",
            "mul {t}, {t}, {x}\n",
            "add {a0}, {a0}, {t}\n",
            "lb {t}, ",
            $col,
            "+4({wp})\n",
            "mul {t}, {t}, {x}\n",
            "add {a1}, {a1}, {t}\n",
            "lb {t}, ",
            $col,
            "+8({wp})\n",
            "mul {t}, {t}, {x}\n",
            "add {a2}, {a2}, {t}\n",
            "lb {t}, ",
            $col,
            "+12({wp})\n",
            "mul {t}, {t}, {x}\n",
            "add {a3}, {a3}, {t}\n",
        )
    };
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
            // Bytes 0 to 3 of each row's word meet lanes 0, 2, 1 and 3 (`SMLAD`'s pairing).
            column!("0", "0"),
            column!("4", "1"),
            column!("2", "2"),
            column!("6", "3"),
            "addi {wp}, {wp}, 16",
            "addi {lp}, {lp}, 8",
            "addi {n}, {n}, -1",
            "bnez {n}, 2b",
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
