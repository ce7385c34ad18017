//! A per-position zoom for a matmul's int8 input: where a position's values are all small against the
//! calibrated scale `s` (their largest over the calibration), they are requantised at `s / z` instead,
//! `z = 2^(k/4)` for the largest `k <= 28` that keeps them in int8 (more of their bits kept), and the
//! matmul's exact sums are divided by `z` (one rounded fixed-point product) back to the sums at `s`,
//! so its rows' multipliers and biases stay those of `s`. Going back costs at most one unit of the
//! sums at `s`; the input's rounding error shrinks by `z`. A per-token scale, as W8A8's, in steps of
//! `2^(1/4)` and without a division.

use super::requantize::{rounding_doubling_high_mul, rounding_shift_right, Multiplier};

/// Steps of the zoom per doubling.
pub const STEPS: u32 = 4;
/// The largest zoom's exponent: inputs at down to `s / 2^7`.
pub const MAX_K: u32 = 7 * STEPS;

/// `2^(j/4)` in Q30 for `j` in `0..4` (`round(2^(30 + j/4))`), below `2^31`.
const UP: [i32; 4] = [1 << 30, 1_276_901_417, 1_518_500_250, 1_805_811_301];
/// `2^(-j/4)` in Q31 for `j` in `0..4` (`round(2^(31 - j/4))`; `j = 0` unused).
const DOWN: [i32; 4] = [i32::MAX, 1_805_811_301, 1_518_500_250, 1_276_901_417];

/// A position's zoom `z = 2^(k/4)`: its int8 input at `s / z`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Zoom {
    k: u32,
}

impl Zoom {
    /// No zoom (`z = 1`).
    pub const NONE: Zoom = Zoom { k: 0 };

    /// The zoom `2^(k/4)` (`k` clamped to [`MAX_K`]).
    pub const fn new(k: u32) -> Self {
        Zoom {
            k: if k > MAX_K { MAX_K } else { k },
        }
    }

    /// `log2(z)` in quarters.
    pub const fn k(self) -> u32 {
        self.k
    }

    /// The multiplier of `m`'s factor times `z`: the requantisation to the zoomed input.
    #[inline]
    pub fn input(self, m: Multiplier) -> Multiplier {
        let (e, j) = (self.k / STEPS, self.k % STEPS);
        match j {
            0 => m.times_pow2(e as i32),
            // m 2^(j/4) = (m UP_j / 2^31) 2^1: about 30 significant bits kept.
            _ => Multiplier {
                m: rounding_doubling_high_mul(m.m, UP[j as usize]),
                shift: m.shift.saturating_add(e as i32 + 1),
            },
        }
    }

    /// `acc / z`, rounded: sums over the zoomed input back at the input's scale `s`.
    #[inline]
    pub fn back(self, acc: i32) -> i32 {
        let (e, j) = (self.k / STEPS, self.k % STEPS);
        match j {
            0 => rounding_shift_right(acc, e),
            _ => rounding_shift_right(rounding_doubling_high_mul(acc, DOWN[j as usize]), e),
        }
    }

    /// `2^(-k/4)`, the factor from the zoomed input's integers to those at `s` (for a hook's view).
    pub fn factor(self) -> f32 {
        libm::exp2f(-(self.k as f32) / STEPS as f32)
    }
}

/// The largest `|v|` of `x`.
#[inline]
pub fn max_abs<T: Copy + Into<i32>>(x: &[T]) -> u32 {
    x.iter().fold(0, |a, &v| a.max(v.into().unsigned_abs()))
}

/// The largest zoom with `|(M z) max| <= 127` (`m` the multiplier to the int8 input at `s`, `max` the
/// vector's largest magnitude): the whole doublings first, then the quarters.
#[inline]
pub fn zoom(m: Multiplier, max: u32) -> Zoom {
    let max = max.min(i32::MAX as u32) as i32;
    let fits = |k: u32| Zoom::new(k).input(m).apply(max) <= 127;
    let Some(e) = (0..=MAX_K / STEPS).rev().find(|&e| fits(e * STEPS)) else {
        return Zoom::NONE;
    };
    let k = (1..STEPS)
        .rev()
        .map(|j| e * STEPS + j)
        .find(|&k| k <= MAX_K && fits(k))
        .unwrap_or(e * STEPS);
    Zoom::new(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_are_the_quarter_powers_of_two() {
        for j in 0..4 {
            let up = libm::round(libm::exp2(30.0 + j as f64 / 4.0));
            assert_eq!(UP[j], up as i32);
            if j > 0 {
                assert_eq!(
                    DOWN[j],
                    libm::round(libm::exp2(31.0 - j as f64 / 4.0)) as i32
                );
            }
        }
    }

    #[test]
    fn the_zoom_is_the_largest_that_keeps_the_vector_in_int8() {
        for real in [1.0 / 64.0, 0.37, 1.0 / 3000.0, 3.0] {
            let m = Multiplier::from_real(real).unwrap();
            for max in [
                0u32,
                1,
                2,
                5,
                100,
                127,
                128,
                300,
                4000,
                127 * 64,
                1 << 20,
                i32::MAX as u32,
            ] {
                let z = zoom(m, max);
                let at = |k: u32| Zoom::new(k).input(m).apply(max as i32);
                assert!(z == Zoom::NONE || at(z.k()) <= 127, "{real} {max}: {z:?}");
                assert!(z.k() == MAX_K || at(z.k() + 1) > 127 || z == Zoom::NONE && at(0) > 127);
                // Within 1 of the real zoomed value (two roundings and the tables' 2^-30).
                let want = max as f64 * real * libm::exp2(z.k() as f64 / 4.0);
                if want < 127.0 {
                    assert!(
                        (at(z.k()) as f64 - want).abs() <= 1.0 + want * 1e-8,
                        "{real} {max}"
                    );
                }
            }
        }
    }

    #[test]
    fn back_undoes_the_zoom_within_one() {
        for k in 0..=MAX_K {
            let z = Zoom::new(k);
            for acc in [0, 1, -1, 1000, -77_777, 1 << 24, -(1 << 24) + 3] {
                let want = acc as f64 * libm::exp2(-(k as f64) / 4.0);
                assert!((z.back(acc) as f64 - want).abs() <= 1.0, "{k} {acc}");
            }
            assert!((z.factor() as f64 - libm::exp2(-(k as f64) / 4.0)).abs() < 1e-6);
        }
    }
}
