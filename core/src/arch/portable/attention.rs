//! The attention's per-score and per-position loops over the int8 cache's integer sums in plain Rust
//! (cores with the DSP instructions and an FPU run the same operations in the same order in assembly,
//! `armv7em/attention.rs`), and the fixed-point weights they share.

use super::lanes::lane_word;

/// One weight in fixed point: `w * inv` rounded half up, saturated to the `i16` range (NaN to 0).
#[inline(always)]
pub(crate) fn fixed(w: f32, inv: f32) -> i32 {
    ((w * inv + 0.5) as i32).clamp(-32768, 32767)
}

/// The lanes of four consecutive weights (`f32` bits) for `dsp::mac_lanes`: `(lane_word(q0, q2),
/// lane_word(q1, q3))`, the pairing `SXTB16` makes of a word of values.
#[inline(always)]
pub(crate) fn lanes(w: [u32; 4], inv: f32) -> (u32, u32) {
    let q = w.map(|w| fixed(f32::from_bits(w), inv));
    (lane_word(q[0], q[2]), lane_word(q[1], q[3]))
}

/// `row[j] = (acc_j * (s_q * scales[j])) / attn_scale` for `j < min(row.len(), scales.len())`,
/// `acc_j` the `i32` sum whose bits `row[j]` holds, returning the scores' maximum from `-inf`,
/// NaNs ignored (as [`crate::math::max_of`], in order).
pub(crate) fn scores(row: &mut [f32], scales: &[f32], s_q: f32, attn_scale: f32) -> f32 {
    let mut max = f32::NEG_INFINITY;
    for (s, s_k) in row.iter_mut().zip(scales) {
        *s = (s.to_bits() as i32 as f32) * (s_q * s_k) / attn_scale;
        max = crate::math::max_of(core::iter::once(*s), max);
    }
    max
}

/// `p_j <- p_j / sum * scales[j]` for `j < min(pattern.len(), scales.len())`, returning the
/// largest of their bits (0 for none).
pub(crate) fn weight_bits(pattern: &mut [f32], scales: &[f32], sum: f32) -> u32 {
    let mut top = 0u32;
    for (p, s) in pattern.iter_mut().zip(scales) {
        *p = *p / sum * s;
        top = top.max(p.to_bits());
    }
    top
}

/// Words `4g .. 4g + 4` of `words` (the `f32` bits of four weights) become words `2g`, `2g + 1`,
/// their [`lanes`], for every `g < words.len() / 4`, in place (group `g` reads what groups before
/// it have not written).
pub(crate) fn pack_lanes(words: &mut [u32], inv: f32) {
    for g in 0..words.len() / 4 {
        if let Some(&[a, b, c, d]) = words.get(4 * g..4 * g + 4) {
            let (e, o) = lanes([a, b, c, d], inv);
            if let Some([even, odd]) = words.get_mut(2 * g..2 * g + 2) {
                (*even, *odd) = (e, o);
            }
        }
    }
}

/// `z[i] = acc_i as f32 * scale`, `acc_i` the `i32` sum whose bits `z[i]` holds.
pub(crate) fn rescale(z: &mut [f32], scale: f32) {
    z.iter_mut()
        .for_each(|z| *z = z.to_bits() as i32 as f32 * scale);
}
