//! The integer square root: `floor(sqrt(x))` of a `u64`, exactly, digit by digit (two bits of `x` per
//! step, shifts and subtractions only).

/// `floor(sqrt(x))`, exact for every `u64`.
pub fn isqrt(x: u64) -> u32 {
    let mut rest = x;
    let mut root = 0u64;
    let mut bit = 1u64 << 62;
    while bit > rest {
        bit >>= 2;
    }
    while bit != 0 {
        if rest >= root + bit {
            rest -= root + bit;
            root = (root >> 1) + bit;
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    root as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(x: u64) {
        let r = u128::from(isqrt(x));
        let x = u128::from(x);
        assert!(r * r <= x && (r + 1) * (r + 1) > x, "{x}: {r}");
    }

    /// Exact (error 0): every `x < 2^20`, every square `k^2` and `k^2 - 1` for `k < 2^20` and a stride of
    /// `k` to `2^32 - 1`, and a dense sample of `u64`.
    #[test]
    fn exact_floor() {
        (0..1u64 << 20).for_each(check);
        let ks = (1..1u64 << 20)
            .chain((1..u64::from(u32::MAX)).step_by(4099))
            .chain([u64::from(u32::MAX)]);
        for k in ks {
            check(k * k);
            check(k * k - 1);
            check(k * k + 1);
        }
        (0..1u64 << 20).map(|i| i << 44).for_each(check);
        check(u64::MAX);
        assert_eq!(isqrt(u64::MAX), u32::MAX);
    }
}
