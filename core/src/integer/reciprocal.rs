//! `1 / d` for an unsigned integer `d` as a Q30 mantissa and a power of two, without a division: `d`
//! normalised to `[0.5, 1)`, the linear estimate `48/17 - 32/17 d`, then three Newton-Raphson steps
//! `y <- y (2 - d y)` in fixed point. Worst relative error `2^-28` over every `d` (the tests check
//! every `d < 2^20`, every power of two and its neighbours, and a dense sample of `u64`).

/// `48 / 17` in Q30, rounded.
const C48_17: u64 = 3_031_741_621;
/// `32 / 17` in Q30, rounded.
const C32_17: u64 = 2_021_161_080;

/// `(m, e)` with `1 / d ~ m / 2^e`, `m` in `[2^30, 2^31]`; `None` for `d = 0`.
pub fn reciprocal(d: u64) -> Option<(u32, u32)> {
    if d == 0 {
        return None;
    }
    let lz = d.leading_zeros();
    // The top 32 bits of d, normalised: dn / 2^32 in [0.5, 1).
    let dn = (d << lz) >> 32;
    let mut y = C48_17 - ((C32_17 * dn) >> 32);
    for _ in 0..3 {
        let dy = (dn * y) >> 32;
        y = (y * ((2 << 30) - dy)) >> 30;
    }
    // d = (dn / 2^32) 2^(64 - lz) up to the dropped low bits, so 1/d = (y / 2^30) 2^(lz - 64).
    Some((y.clamp(1 << 30, 1 << 31) as u32, 94 - lz))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relative_error(d: u64) -> f64 {
        let (m, e) = reciprocal(d).unwrap();
        assert!((1 << 30..=1 << 31).contains(&m), "{d}: {m}");
        let got = f64::from(m) * libm::exp2(-f64::from(e));
        let want = 1.0 / d as f64;
        (got - want).abs() / want
    }

    #[test]
    fn within_2_pow_minus_28() {
        let mut worst = 0f64;
        let powers = (0..64).flat_map(|k| {
            let p = 1u64 << k;
            [p.saturating_sub(1).max(1), p, p.saturating_add(1)]
        });
        let dense =
            (1..1u64 << 20).chain((1..u64::MAX / 7_919_000_000_003).map(|i| i * 7_919_000_000_003));
        for d in powers.chain(dense).chain([u64::MAX]) {
            worst = worst.max(relative_error(d));
        }
        assert!(worst <= libm::exp2(-28.0), "worst {worst:e}");
        assert_eq!(reciprocal(0), None);
    }
}
