//! The widening multiplies for ARMv6-M, which has only `MULS` (32 x 32 -> 32): from four products of
//! 16-bit halves, each exact in 32 bits, added in 64 (a few `ADDS`/`ADCS`), instead of the 64 x 64
//! library multiply (`__aeabi_lmul`, about 45 instructions). Exact: the same bits as the plain
//! products. Plain Rust, shared by `portable/` so that the host's tests hold it to them; `armv6m/`
//! takes it as its `mul_wide` and `mul_wide_u`.

/// `a * b`, exact: `a = ah 2^16 + al`, `b = bh 2^16 + bl` (`ah`, `bh` signed, `al`, `bl` unsigned),
/// `ab = ah bh 2^32 + (ah bl + al bh) 2^16 + al bl`.
#[inline(always)]
pub(crate) fn mul_wide_halves(a: i32, b: i32) -> i64 {
    let (ah, al) = (a >> 16, a & 0xffff);
    let (bh, bl) = (b >> 16, b & 0xffff);
    // |ah bh| <= 2^30, |ah bl|, |al bh| < 2^31, al bl < 2^32: each fits its type.
    let high = i64::from(ah * bh) << 32;
    let middle = (i64::from(ah * bl) + i64::from(al * bh)) << 16;
    high + middle + i64::from((al as u32) * (bl as u32))
}

/// `a * b`, exact, from the halves likewise.
#[inline(always)]
pub(crate) fn mul_wide_u_halves(a: u32, b: u32) -> u64 {
    let (ah, al) = (a >> 16, a & 0xffff);
    let (bh, bl) = (b >> 16, b & 0xffff);
    let high = u64::from(ah * bh) << 32;
    let middle = (u64::from(ah * bl) + u64::from(al * bh)) << 16;
    high + middle + u64::from(al * bl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_the_plain_products() {
        let edges = [
            i32::MIN,
            i32::MIN + 1,
            -65536,
            -65535,
            -1,
            0,
            1,
            65535,
            65536,
            i32::MAX,
        ];
        let mut next = crate::testing::lcg(9);
        let sample = edges.into_iter().chain((0..2000).map(|_| next() as i32));
        let values: std::vec::Vec<i32> = sample.collect();
        for &a in &values {
            for &b in values.iter().step_by(7) {
                assert_eq!(
                    mul_wide_halves(a, b),
                    i64::from(a) * i64::from(b),
                    "{a} {b}"
                );
                let (a, b) = (a as u32, b as u32);
                assert_eq!(
                    mul_wide_u_halves(a, b),
                    u64::from(a) * u64::from(b),
                    "{a} {b}"
                );
            }
        }
    }
}
