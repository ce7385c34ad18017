//! Rotary positional embedding, as TransformerLens's `apply_rotary` (NeoX halves or GPT-J pairs).

/// `sin` and `cos` of every rotated dimension at `pos`, written into `sin[..dim]` and `cos[..dim]`:
/// `angle_i = pos / base^(k_i / (dim / 2))`, `k_i = i mod dim/2` (halves) or `i / 2` (pairs).
pub fn angles(
    pos: usize,
    dim: usize,
    base: f32,
    adjacent_pairs: bool,
    sin: &mut [f32],
    cos: &mut [f32],
) {
    let half = dim / 2;
    for (i, (s, c)) in sin.iter_mut().zip(cos.iter_mut()).enumerate().take(dim) {
        let k = if adjacent_pairs { i / 2 } else { i % half };
        let freq = libm::powf(base, k as f32 / half as f32);
        let angle = pos as f32 / freq;
        *s = libm::sinf(angle);
        *c = libm::cosf(angle);
    }
}

/// Rotates the first `sin.len()` dimensions of one head's `x` in place:
/// `x_rot = x * cos + flip(x) * sin`, with `flip` = `[-x_2, x_1]` on halves or adjacent pairs.
pub fn rotate(x: &mut [f32], sin: &[f32], cos: &[f32], adjacent_pairs: bool) {
    let dim = sin.len().min(cos.len()).min(x.len()) & !1;
    let (x, sin, cos) = (&mut x[..dim], &sin[..dim], &cos[..dim]);
    // One pair `(a, b)` with its `(sin, cos)` at `a`'s and `b`'s places: `(a cos_a - b sin_a, b cos_b +
    // a sin_b)`.
    let turn = |a: &mut f32, b: &mut f32, (sa, ca): (f32, f32), (sb, cb): (f32, f32)| {
        let (u, v) = (*a, *b);
        *a = u * ca + -v * sa;
        *b = v * cb + u * sb;
    };
    if adjacent_pairs {
        let places = sin.chunks_exact(2).zip(cos.chunks_exact(2));
        for (p, (s, c)) in x.chunks_exact_mut(2).zip(places) {
            let [a, b] = p else { continue };
            turn(a, b, (s[0], c[0]), (s[1], c[1]));
        }
    } else {
        let half = dim / 2;
        let (lo, hi) = x.split_at_mut(half);
        let (s_lo, s_hi) = sin.split_at(half);
        let (c_lo, c_hi) = cos.split_at(half);
        let places = s_lo.iter().zip(c_lo).zip(s_hi.iter().zip(c_hi));
        for ((a, b), ((&sa, &ca), (&sb, &cb))) in lo.iter_mut().zip(hi).zip(places) {
            turn(a, b, (sa, ca), (sb, cb));
        }
    }
}
