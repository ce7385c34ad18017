//! Rotary positional embedding, as TransformerLens's `apply_rotary` (NeoX halves or GPT-J pairs).

/// `sin` and `cos` of every rotated dimension at `pos`, written into `sin[..dim]` and `cos[..dim]`:
/// `angle_i = pos / base^(k_i / (dim / 2))`, `k_i = i mod dim/2` (halves) or `i / 2` (pairs). Each
/// of the `dim / 2` distinct angles is computed once and written to both of its places (`dim` is even,
/// as the config checks; an odd one's last place is left as it is).
pub fn angles(
    pos: usize,
    dim: usize,
    base: f32,
    adjacent_pairs: bool,
    sin: &mut [f32],
    cos: &mut [f32],
) {
    let dim = dim.min(sin.len()).min(cos.len());
    let half = dim / 2;
    // The places of angle `k`: `k` and `k + half` (halves) or `2k` and `2k + 1` (pairs).
    let places = |k: usize| match adjacent_pairs {
        true => (2 * k, 2 * k + 1),
        false => (k, k + half),
    };
    for k in 0..half {
        let freq = libm::powf(base, k as f32 / half as f32);
        let angle = pos as f32 / freq;
        let (s, c) = (libm::sinf(angle), libm::cosf(angle));
        let (a, b) = places(k);
        for i in [a, b] {
            if let (Some(si), Some(ci)) = (sin.get_mut(i), cos.get_mut(i)) {
                (*si, *ci) = (s, c);
            }
        }
    }
}

/// Rotates the first `sin.len()` dimensions of one head's `x` in place:
/// `x_rot = x * cos + flip(x) * sin`, with `flip` = `[-x_2, x_1]` on halves or adjacent pairs.
#[inline]
pub fn rotate(x: &mut [f32], sin: &[f32], cos: &[f32], adjacent_pairs: bool) {
    let dim = sin.len().min(cos.len()).min(x.len()) & !1;
    let half = dim / 2;
    // One pair `(a, b)` with its `(sin, cos)` at `a`'s and `b`'s places: `(a cos_a - b sin_a, b cos_b +
    // a sin_b)`.
    let turn = |a: &mut f32, b: &mut f32, (sa, ca): (f32, f32), (sb, cb): (f32, f32)| {
        let (u, v) = (*a, *b);
        *a = u * ca + -v * sa;
        *b = v * cb + u * sb;
    };
    if adjacent_pairs {
        let (x, sin, cos) = (&mut x[..dim], &sin[..dim], &cos[..dim]);
        for i in 0..half {
            let (lo, hi) = x.split_at_mut(2 * i + 1);
            let (a, b) = (&mut lo[2 * i], &mut hi[0]);
            turn(
                a,
                b,
                (sin[2 * i], cos[2 * i]),
                (sin[2 * i + 1], cos[2 * i + 1]),
            );
        }
    } else {
        let (lo, hi) = x[..dim].split_at_mut(half);
        let (lo, hi) = (&mut lo[..half], &mut hi[..half]);
        let (s_lo, s_hi) = (&sin[..half], &sin[half..dim]);
        let (c_lo, c_hi) = (&cos[..half], &cos[half..dim]);
        for i in 0..half {
            turn(
                &mut lo[i],
                &mut hi[i],
                (s_lo[i], c_lo[i]),
                (s_hi[i], c_hi[i]),
            );
        }
    }
}

/// [`rotate`] of every whole head of `d_head` values in `x` (the query or key heads of a position).
pub fn rotate_heads(x: &mut [f32], d_head: usize, sin: &[f32], cos: &[f32], adjacent_pairs: bool) {
    if d_head == 0 {
        return;
    }
    for head in x.chunks_exact_mut(d_head) {
        rotate(head, sin, cos, adjacent_pairs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every place's angle from its own formula, `pos / base^(k_i / (dim / 2))`.
    fn each_place(pos: usize, dim: usize, base: f32, pairs: bool) -> [std::vec::Vec<f32>; 2] {
        let half = dim / 2;
        let angle = |i: usize| {
            let k = if pairs { i / 2 } else { i % half };
            pos as f32 / libm::powf(base, k as f32 / half as f32)
        };
        [
            (0..dim).map(|i| libm::sinf(angle(i))).collect(),
            (0..dim).map(|i| libm::cosf(angle(i))).collect(),
        ]
    }

    #[test]
    fn each_distinct_angle_once_gives_every_place_its_own_bits() {
        for (dim, base, pairs) in [(8, 10000.0, false), (8, 10000.0, true), (6, 500.0, false)] {
            for pos in [0, 1, 7, 63, 127, 2047] {
                let (mut sin, mut cos) = ([9.0f32; 10], [9.0f32; 10]);
                angles(pos, dim, base, pairs, &mut sin, &mut cos);
                let [want_sin, want_cos] = each_place(pos, dim, base, pairs);
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<std::vec::Vec<_>>();
                assert_eq!(bits(&sin[..dim]), bits(&want_sin), "{dim} {pairs} {pos}");
                assert_eq!(bits(&cos[..dim]), bits(&want_cos), "{dim} {pairs} {pos}");
                assert!(sin[dim..].iter().chain(&cos[dim..]).all(|&v| v == 9.0));
            }
        }
    }

    #[test]
    fn rotating_heads_turns_each_pair_by_its_angle() {
        let (mut sin, mut cos) = ([0.0f32; 4], [0.0f32; 4]);
        for pairs in [false, true] {
            angles(3, 4, 10000.0, pairs, &mut sin, &mut cos);
            // Two heads of 6 with 4 rotated dimensions; the last two of each untouched.
            let mut x: [f32; 12] = core::array::from_fn(|i| i as f32 - 5.5);
            let before = x;
            rotate_heads(&mut x, 6, &sin, &cos, pairs);
            for h in 0..2 {
                let (o, b) = (&x[6 * h..6 * h + 6], &before[6 * h..6 * h + 6]);
                let couples: [(usize, usize); 2] = if pairs {
                    [(0, 1), (2, 3)]
                } else {
                    [(0, 2), (1, 3)]
                };
                for (i, j) in couples {
                    assert_eq!(o[i], b[i] * cos[i] + -b[j] * sin[i]);
                    assert_eq!(o[j], b[j] * cos[j] + b[i] * sin[j]);
                }
                assert_eq!(&o[4..], &b[4..]);
            }
        }
    }
}
