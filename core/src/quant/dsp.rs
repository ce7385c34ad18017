//! The two Cortex-M DSP instructions the int8 kernels are built from, on packed 16-bit lanes:
//! `SXTB16` (bytes 0 and 2, or 1 and 3, of a word, each sign-extended into a 16-bit lane) and `SMLAD`
//! (`acc + lo(a) * lo(b) + hi(a) * hi(b)`, wrapping).
//!
//! With the feature `dsp` on an ARM target they are the instructions themselves (ARMv7E-M: Cortex-M4,
//! M7, M33 with DSP); everywhere else they are the same integer functions in plain Rust. LLVM forms
//! `SMLAD` only from pairs of `i16` loads and has no pattern for `SXTB16` at all, so from `i8` weights
//! in flash safe Rust cannot reach them: this module is the crate's only integer `unsafe`, three one-instruction
//! `asm!` blocks that touch no memory, and the four-row loop `dot4_strided` that the matmuls, the
//! attention scores and the value mix spend most of their time in (the compiler's loop over the same
//! instructions kept two more address adds and the lane split of the vector per group, and called the
//! kernel once per four rows: 28 instructions per 16 multiply-accumulates instead of 21.75).
#![cfg_attr(feature = "dsp", allow(unsafe_code))]

/// Lanes `[b0, b2]` of `v`'s bytes `[b0, b1, b2, b3]`, each sign-extended to 16 bits (`SXTB16 v`).
#[inline(always)]
pub fn sxtb16(v: u32) -> u32 {
    #[cfg(all(feature = "dsp", target_arch = "arm"))]
    {
        let out: u32;
        // SAFETY: one register-to-register instruction of ARMv7E-M (the `dsp` feature asserts the core
        // has it): it reads `v`, writes `out`, and touches no memory, stack or flags.
        unsafe {
            core::arch::asm!("sxtb16 {0}, {1}", lateout(reg) out, in(reg) v,
                options(pure, nomem, nostack, preserves_flags));
        }
        out
    }
    #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
    {
        let lane = |b: u32| (b as u8 as i8 as i16 as u16) as u32;
        lane(v) | lane(v >> 16) << 16
    }
}

/// Lanes `[b1, b3]` of `v`'s bytes, each sign-extended to 16 bits (`SXTB16 v, ROR #8`).
#[inline(always)]
pub fn sxtb16_ror8(v: u32) -> u32 {
    #[cfg(all(feature = "dsp", target_arch = "arm"))]
    {
        let out: u32;
        // SAFETY: as in `sxtb16`: one register-only instruction, no memory, stack or flags.
        unsafe {
            core::arch::asm!("sxtb16 {0}, {1}, ror #8", lateout(reg) out, in(reg) v,
                options(pure, nomem, nostack, preserves_flags));
        }
        out
    }
    #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
    {
        sxtb16(v >> 8)
    }
}

/// `acc + lo(a) * lo(b) + hi(a) * hi(b)` on signed 16-bit lanes, wrapping (`SMLAD`; the kernels keep
/// their sums far from overflow).
#[inline(always)]
pub fn smlad(a: u32, b: u32, acc: i32) -> i32 {
    #[cfg(all(feature = "dsp", target_arch = "arm"))]
    {
        let out: i32;
        // SAFETY: one register-only instruction; it may set the sticky Q flag on overflow, which no Rust
        // code reads (hence no `preserves_flags`), and touches no memory or stack.
        unsafe {
            core::arch::asm!("smlad {0}, {1}, {2}, {3}", lateout(reg) out, in(reg) a, in(reg) b,
                in(reg) acc, options(pure, nomem, nostack));
        }
        out
    }
    #[cfg(not(all(feature = "dsp", target_arch = "arm")))]
    {
        let (lo, hi) = (
            |v: u32| v as u16 as i16 as i32,
            |v: u32| (v >> 16) as u16 as i16 as i32,
        );
        acc.wrapping_add(lo(a) * lo(b)).wrapping_add(hi(a) * hi(b))
    }
}

/// Four bytes as one little-endian word.
#[inline(always)]
pub(crate) fn word(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// `acc + lo(W) e.lo + hi(W) e.hi + lo(W') o.lo + hi(W') o.hi`, `W` and `W'` the even and odd signed
/// bytes of `w` as 16-bit lanes (`SXTB16`): bytes 0 to 3 of `w` times lanes `e.lo, o.lo, e.hi, o.hi`.
#[inline(always)]
pub(crate) fn mac_lanes(acc: i32, w: u32, (e, o): (u32, u32)) -> i32 {
    smlad(sxtb16_ror8(w), o, smlad(sxtb16(w), e, acc))
}

/// `sums[r] + sum_g (lo(W_g) e_g.lo + hi(W_g) e_g.hi + lo(W'_g) o_g.lo + hi(W'_g) o_g.hi)` for four
/// rows of bytes, where `W_g` and `W'_g` are the even and odd bytes of a row's `g`-th word as 16-bit
/// lanes (`SXTB16`) and `(e_g, o_g)` the `g`-th item of `lanes`, over whole words of the rows: the
/// portable four-row kernel.
#[cfg(any(
    test,
    not(any(feature = "std", all(feature = "dsp", target_arch = "arm")))
))]
#[inline(always)]
pub(crate) fn dot4_lanes(
    rows: [&[u8]; 4],
    lanes: impl Iterator<Item = (u32, u32)>,
    mut sums: [i32; 4],
) -> [i32; 4] {
    let [a, b, c, d] = rows.map(|r| r.chunks_exact(4));
    for ((((a, b), c), d), x) in a.zip(b).zip(c).zip(d).zip(lanes) {
        for (s, r) in sums.iter_mut().zip([a, b, c, d]) {
            *s = mac_lanes(*s, word(r), x);
        }
    }
    sums
}

/// One group of `dot4_strided`'s loop as `asm!` text: the lanes of four columns (`LDRD`), then per row
/// one word, its two `SXTB16` splits and two `SMLAD`s (rows 1 and 2 at `p0 + s`, `p0 + 2s`, row 3 at
/// `p3`, row 0 at `p0`; `p3` and `p0` step one word).
#[cfg(all(feature = "dsp", not(feature = "mve"), target_arch = "arm"))]
macro_rules! group {
    () => {
        concat!(
            "ldrd {xe}, {xo}, [{xp}], #8\n",
            "ldr.w {w}, [{p0}, {s}]\n",
            "sxtb16 {t}, {w}\n",
            "smlad {a1}, {t}, {xe}, {a1}\n",
            "sxtb16 {w}, {w}, ror #8\n",
            "smlad {a1}, {w}, {xo}, {a1}\n",
            "ldr.w {w}, [{p0}, {s}, lsl #1]\n",
            "sxtb16 {t}, {w}\n",
            "smlad {a2}, {t}, {xe}, {a2}\n",
            "sxtb16 {w}, {w}, ror #8\n",
            "smlad {a2}, {w}, {xo}, {a2}\n",
            "ldr {w}, [{p3}], #4\n",
            "sxtb16 {t}, {w}\n",
            "smlad {a3}, {t}, {xe}, {a3}\n",
            "sxtb16 {w}, {w}, ror #8\n",
            "smlad {a3}, {w}, {xo}, {a3}\n",
            "ldr {w}, [{p0}], #4\n",
            "sxtb16 {t}, {w}\n",
            "smlad {a0}, {t}, {xe}, {a0}\n",
            "sxtb16 {w}, {w}, ror #8\n",
            "smlad {a0}, {w}, {xo}, {a0}\n",
        )
    };
}

/// The four-row kernel (`dot4_strided`, whose sums it computes) with the DSP instructions: when every
/// row is whole, one `asm!` loop of 21.75 instructions per 16 multiply-accumulates (per group of four
/// columns `LDRD` of the lanes, then per row `LDR`, two `SXTB16`, two `SMLAD`; four groups per
/// iteration) and 14 per quad of rows; when some row ends early, the same loop one quad at a time, over
/// the groups the quad's last row has.
#[cfg(all(feature = "dsp", not(feature = "mve"), target_arch = "arm"))]
#[inline(never)]
pub(crate) fn dot4_strided(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    let quads = out.len() / 4;
    let groups = lanes.len() / 2;
    let whole = (4 * quads)
        .checked_sub(1)
        .and_then(|last| last.checked_mul(stride))
        .and_then(|start| start.checked_add(4 * groups))
        .is_some_and(|need| need <= rows.len());
    if groups > 0 && whole {
        let out = out.as_mut_ptr();
        // SAFETY: every access is in bounds and aligned as required. Row `r < 4 * quads` starts at
        // `rows + r * stride` and the loop reads `4 * groups` bytes of it (`LDR` allows unaligned
        // words on ARMv7E-M), all within `rows` (checked above: the last row ends at `(4 * quads -
        // 1) * stride + 4 * groups <= rows.len()`); per quad it reads the `2 * groups` words of
        // `lanes`, a `&[u32]` (word-aligned, as `LDRD` needs), and writes the quad's four words of
        // `out`, a `&mut [i32]` (`STRD`), `4 * quads <= out.len()` in all. `groups > 0` and
        // `quads > 0`, so each loop, which tests its end after its body, runs over exactly `groups`
        // groups (four per iteration, the first entering at the copy that `groups % 4` picks: its
        // address, from the table's four bytes, is loaded into `pc` with the Thumb bit set) and
        // `quads` quads. Its own state lives in 32 bytes it reserves below `sp` and releases (the
        // stack, hence no `nostack`); it changes the flags and the sticky Q flag, which no Rust code
        // reads.
        unsafe {
            core::arch::asm!(
                // [sp]: `out` so far; 4: its end; 8: `lanes`; 12: their end; 16: from one quad's
                // row ends to the next quad's row starts (`4 * stride - bytes`); 20: the first
                // group's copy; 24: two zero words.
                "sub sp, sp, #32",
                "str {a0}, [sp]",
                "str {a1}, [sp, #4]",
                "str {xp}, [sp, #8]",
                "add {a0}, {xp}, {t}, lsl #1",
                "str {a0}, [sp, #12]",
                "rsb {t}, {t}, {s}, lsl #2",
                "str {t}, [sp, #16]",
                "adr {t}, 7f",
                "ldrb {w}, [{t}, {w}]",
                "adr {t}, 5f",
                "add {t}, {t}, {w}, lsl #1",
                "orr {t}, {t}, #1",
                "str {t}, [sp, #20]",
                "add {p3}, {p0}, {s}, lsl #1",
                "add {p3}, {p3}, {s}",
                "mov {a2}, #0",
                "mov {a3}, #0",
                "strd {a2}, {a3}, [sp, #24]",
                "b 4f",
                // Half the offset of the copy the first group enters at, by `groups % 4`.
                "7:",
                ".byte 0",
                ".byte (6f - 5f) / 2",
                ".byte (9f - 5f) / 2",
                ".byte (8f - 5f) / 2",
                ".p2align 1",
                // One quad of rows: p0 is row 0, p3 row 3.
                "4:",
                "ldr {xp}, [sp, #8]",
                "ldrd {a0}, {a1}, [sp, #24]",
                "ldrd {a2}, {a3}, [sp, #24]",
                "ldr pc, [sp, #20]",
                "5:",
                group!(),
                "8:",
                group!(),
                "9:",
                group!(),
                "6:",
                group!(),
                "ldr {t}, [sp, #12]",
                "cmp {xp}, {t}",
                "bne 5b",
                "ldr {t}, [sp]",
                "strd {a0}, {a1}, [{t}], #8",
                "strd {a2}, {a3}, [{t}], #8",
                "str {t}, [sp]",
                // The next quad's rows 0 and 3: four rows on from this one's.
                "ldr {w}, [sp, #16]",
                "add {p0}, {p0}, {w}",
                "add {p3}, {p3}, {w}",
                "ldr {w}, [sp, #4]",
                "cmp {t}, {w}",
                "bne 4b",
                "add sp, sp, #32",
                p0 = inout(reg) rows.as_ptr() => _,
                p3 = out(reg) _,
                s = in(reg) stride,
                xp = inout(reg) lanes.as_ptr() => _,
                t = inout(reg) 4 * groups => _,
                a0 = inout(reg) out => _,
                a1 = inout(reg) out.wrapping_add(4 * quads) => _,
                a2 = out(reg) _,
                a3 = out(reg) _,
                xe = out(reg) _,
                xo = out(reg) _,
                w = inout(reg) groups % 4 => _,
            );
        }
        return;
    }
    // Some row ends early (or no groups): one quad at a time, each over the groups its last
    // (shortest) row has, through the loop above (a call that is whole by construction, so it
    // recurses no further): what the portable kernel computes, without a second copy in flash.
    for (q, sums) in out.chunks_exact_mut(4).enumerate() {
        let rows = rows.get((4 * q).saturating_mul(stride)..).unwrap_or(&[]);
        let last = rows.len().saturating_sub(stride.saturating_mul(3));
        match lanes.get(..2 * groups.min(last / 4)) {
            Some(lanes) if !lanes.is_empty() => dot4_strided(rows, stride, lanes, sums),
            _ => sums.fill(0),
        }
    }
}

/// The four-row kernel (`dot4_strided`, whose sums it computes) in plain Rust, one quad of rows at a
/// time (out of line, so its callers keep small frames).
#[cfg(any(
    test,
    not(any(feature = "std", all(feature = "dsp", target_arch = "arm")))
))]
#[inline(never)]
pub(crate) fn dot4_strided_portable(rows: &[u8], stride: usize, lanes: &[u32], out: &mut [i32]) {
    for (q, sums) in out.chunks_exact_mut(4).enumerate() {
        let row = |k: usize| {
            let r = (4 * q + k).saturating_mul(stride);
            rows.get(r..).unwrap_or(&[])
        };
        let pairs = lanes.chunks_exact(2).map(|p| (p[0], p[1]));
        let quad = dot4_lanes([row(0), row(1), row(2), row(3)], pairs, [0; 4]);
        sums.copy_from_slice(&quad);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_sign_extended_bytes() {
        let v = u32::from_le_bytes([0x80, 0x7f, 0xff, 0x01]);
        assert_eq!(sxtb16(v), 0xffff_ff80);
        assert_eq!(sxtb16_ror8(v), 0x0001_007f);
        assert_eq!(smlad(0xffff_ff80, 0x0002_0003, 10), 10 - 128 * 3 - 2);
    }
}
