//! What the unit tests share: the pseudo-random sequence they draw their inputs from, and the MLP
//! activations' definitions in `f64`.

/// The successive states of the linear congruential generator `s <- 1664525 s + 1013904223 (mod 2^32)`
/// (Numerical Recipes' constants) started at `seed`, one per call.
pub(crate) fn lcg(seed: u32) -> impl FnMut() -> u32 {
    let mut s = seed;
    move || {
        s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        s
    }
}

/// Two successive values of `next` as one `u64` (high word first).
pub(crate) fn wide(mut next: impl FnMut() -> u32) -> impl FnMut() -> u64 {
    move || u64::from(next()) << 32 | u64::from(next())
}

/// The elementwise activation `act` at `x` in `f64`, as TransformerLens defines it (the tanh GELUs
/// share one formula; SoLU, not elementwise, is ReLU's `max(x, 0)` here and never asked for).
pub(crate) fn activation_f64(act: crate::config::ActFn, x: f64) -> f64 {
    use crate::config::ActFn;
    let sqrt_2_pi = libm::sqrt(2.0 / core::f64::consts::PI);
    match act {
        ActFn::Relu | ActFn::Solu => x.max(0.0),
        ActFn::Gelu => 0.5 * x * (1.0 + libm::erf(x / core::f64::consts::SQRT_2)),
        ActFn::GeluNew | ActFn::GeluPytorchTanh | ActFn::GeluFast => {
            0.5 * x * (1.0 + libm::tanh(sqrt_2_pi * (x + 0.044715 * x * x * x)))
        }
        ActFn::Silu => x / (1.0 + libm::exp(-x)),
    }
}
