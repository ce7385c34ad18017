//! `u64` division by shift and subtract: compiler-builtins' `u64` division costs 0.4 KB of flash, and
//! the demo divides only to report the mean cost per token, never in a timed step.

/// `(n / d, n % d)`; `d` must not be 0.
///
/// Restoring binary long division, one quotient bit per iteration: the bits of `n` are shifted out at
/// the top into the remainder while the quotient's are shifted in at the bottom.
pub fn div_rem(mut n: u64, d: u32) -> (u64, u32) {
    let d = u64::from(d);
    let mut r = 0u64;
    for _ in 0..u64::BITS {
        r = (r << 1) | (n >> 63);
        n <<= 1;
        if r >= d {
            r -= d;
            n |= 1;
        }
    }
    (n, r as u32)
}
