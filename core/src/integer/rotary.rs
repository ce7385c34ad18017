//! Rotary positions on int8 queries and keys: each pair `(a, b)` turned by its angle with `cos` and
//! `sin` in Q14 (a table the plan carries, one `(cos, sin)` per position and distinct angle), `(a cos -
//! b sin, b cos + a sin)` rounded once and saturated to int8, on NeoX halves or GPT-J adjacent pairs as
//! the float path's `math::rotary`. Worst error against the real rotation of the same int8 pair: 0.5 plus
//! `(|a| + |b|) 2^-15` (the table's rounding), under 0.508, where the result lies in `[-128, 127]`;
//! beyond, it saturates.

use super::requantize::{rounding_shift_right, saturate_i8};

/// Fraction bits of the table's `cos` and `sin`.
pub const FRAC_BITS: u32 = 14;

/// `(cos, sin)` of `angle` in Q14, rounded (host, at conversion).
pub fn q14(angle: f64) -> (i16, i16) {
    let one = f64::from(1u32 << FRAC_BITS);
    let q = |v: f64| libm::round(v * one) as i16;
    (q(libm::cos(angle)), q(libm::sin(angle)))
}

/// The pair `(a, b)` turned by the angle whose Q14 `cos` and `sin` are `cs`.
#[inline(always)]
pub fn turn(a: i8, b: i8, (c, s): (i16, i16)) -> (i8, i8) {
    let (a, b, c, s) = (i32::from(a), i32::from(b), i32::from(c), i32::from(s));
    // |a c| + |b s| <= 2 * 128 * 2^14 = 2^22: no overflow.
    (
        saturate_i8(rounding_shift_right(a * c - b * s, FRAC_BITS)),
        saturate_i8(rounding_shift_right(b * c + a * s, FRAC_BITS)),
    )
}

/// Rotates the first `dim` values of every whole head of `d_head` values in `x`, pair `k` (`k <
/// dim / 2`) by `angle(k)`: pairs `(k, k + dim/2)` (halves) or `(2k, 2k + 1)` (adjacent pairs).
#[inline]
pub fn rotate_heads(
    x: &mut [i8],
    d_head: usize,
    dim: usize,
    adjacent_pairs: bool,
    angle: impl Fn(usize) -> (i16, i16),
) {
    if d_head == 0 {
        return;
    }
    let dim = dim.min(d_head) & !1;
    let half = dim / 2;
    for head in x.chunks_exact_mut(d_head) {
        for k in 0..half {
            let (i, j) = match adjacent_pairs {
                true => (2 * k, 2 * k + 1),
                false => (k, k + half),
            };
            (head[i], head[j]) = turn(head[i], head[j], angle(k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_int8_pair_turns_within_its_stated_error() {
        let mut worst = 0f64;
        for angle in [0.0, 0.3, 1.0, 2.5, -1.2, 3.0, 100.0] {
            let cs = q14(angle);
            for a in i8::MIN..=i8::MAX {
                for b in i8::MIN..=i8::MAX {
                    let (x, y) = (f64::from(a), f64::from(b));
                    let (c, s) = (libm::cos(angle), libm::sin(angle));
                    let want = [x * c - y * s, y * c + x * s];
                    let (p, q) = turn(a, b, cs);
                    for (got, want) in [(p, want[0]), (q, want[1])] {
                        if (-128.0..=127.0).contains(&want) {
                            let err = (f64::from(got) - want).abs();
                            assert!(err <= 0.5 + (x.abs() + y.abs()) / 32768.0 + 1e-9);
                            worst = worst.max(err);
                        } else {
                            assert_eq!(got, if want > 0.0 { 127 } else { -128 });
                        }
                    }
                }
            }
        }
        assert!(worst < 0.508, "{worst}");
    }

    #[test]
    fn heads_turn_their_pairs_and_leave_the_rest() {
        for pairs in [false, true] {
            // Two heads of 6, 4 of them rotated; pair k by angle k + 1.
            let mut x: [i8; 12] = core::array::from_fn(|i| 10 * i as i8 - 60);
            let before = x;
            rotate_heads(&mut x, 6, 4, pairs, |k| q14(k as f64 + 1.0));
            let couples = if pairs {
                [(0, 1), (2, 3)]
            } else {
                [(0, 2), (1, 3)]
            };
            for h in 0..2 {
                let (o, b) = (&x[6 * h..6 * h + 6], &before[6 * h..6 * h + 6]);
                for (k, (i, j)) in couples.into_iter().enumerate() {
                    assert_eq!((o[i], o[j]), turn(b[i], b[j], q14(k as f64 + 1.0)));
                }
                assert_eq!(&o[4..], &b[4..]);
            }
        }
    }
}
