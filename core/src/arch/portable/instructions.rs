//! The DSP instructions' integer functions in plain Rust, on packed 16-bit lanes: `SXTB16` (bytes 0
//! and 2, or 1 and 3, of a word, each sign-extended into a 16-bit lane), `SMLAD` (`acc + lo(a) * lo(b)
//! + hi(a) * hi(b)`, wrapping) and `SMLALD` (the same into 64 bits). Cores with the instructions run
//! them in assembly (`armv7em/dsp.rs`), the same integers. Also the widening multiplies of the
//! integer arithmetic's requantisation (`SMULL`/`UMULL`, `MULH`), which ARMv6-M lacks (`armv6m/wide.rs`).

/// Lanes `[b0, b2]` of `v`'s bytes `[b0, b1, b2, b3]`, each sign-extended to 16 bits (`SXTB16 v`).
#[inline(always)]
pub fn sxtb16(v: u32) -> u32 {
    let lane = |b: u32| (b as u8 as i8 as i16 as u16) as u32;
    lane(v) | lane(v >> 16) << 16
}

/// Lanes `[b1, b3]` of `v`'s bytes, each sign-extended to 16 bits (`SXTB16 v, ROR #8`).
#[inline(always)]
pub fn sxtb16_ror8(v: u32) -> u32 {
    sxtb16(v >> 8)
}

/// `acc + lo(a) * lo(b) + hi(a) * hi(b)` on signed 16-bit lanes, wrapping (`SMLAD`; the kernels keep
/// their sums far from overflow).
#[inline(always)]
pub fn smlad(a: u32, b: u32, acc: i32) -> i32 {
    let (lo, hi) = (
        |v: u32| v as u16 as i16 as i32,
        |v: u32| (v >> 16) as u16 as i16 as i32,
    );
    acc.wrapping_add(lo(a) * lo(b)).wrapping_add(hi(a) * hi(b))
}

/// `acc + lo(a) * lo(b) + hi(a) * hi(b)` on signed 16-bit lanes into a 64-bit sum, exact (`SMLALD`):
/// the int16 KV cache's sums.
#[inline(always)]
pub fn smlald(a: u32, b: u32, acc: i64) -> i64 {
    let (lo, hi) = (
        |v: u32| v as u16 as i16 as i64,
        |v: u32| (v >> 16) as u16 as i16 as i64,
    );
    acc.wrapping_add(lo(a) * lo(b)).wrapping_add(hi(a) * hi(b))
}

/// `a * b`, exact (`SMULL`).
#[inline(always)]
pub fn mul_wide(a: i32, b: i32) -> i64 {
    i64::from(a) * i64::from(b)
}

/// `a * b`, exact (`UMULL`).
#[inline(always)]
pub fn mul_wide_u(a: u32, b: u32) -> u64 {
    u64::from(a) * u64::from(b)
}
