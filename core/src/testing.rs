//! What the unit tests share: the pseudo-random sequence they draw their inputs from.

/// The successive states of the linear congruential generator `s <- 1664525 s + 1013904223 (mod 2^32)`
/// (Numerical Recipes' constants) started at `seed`, one per call.
pub(crate) fn lcg(seed: u32) -> impl FnMut() -> u32 {
    let mut s = seed;
    move || {
        s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        s
    }
}
