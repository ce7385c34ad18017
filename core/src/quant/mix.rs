//! The attention value mix over an int8 value cache in fixed point: `z[i] = S * sum_j q_j v_j[i]` with
//! int16 weights `q_j = round(w_j / S)` and one scale `S = max_j |w_j| / 32767` per head and query.
//!
//! The weights `w_j = p_j * s_vj` (pattern times value scale) are converted once per head and query;
//! each output is then an exact integer sum over positions, four outputs at a time on the matmuls'
//! four-row kernel ([`dot4::dot4_strided`]: the weights of positions `4g, 4g + 2` and `4g + 1, 4g + 3` as
//! the 16-bit lanes of two words, `SMLAD`), and rescaled once. The weights' rounding, at most `S / 2` each, is 1/65534 of the largest weight: far
//! below the int8 rounding of the values it multiplies.

use super::attention_loops::{fixed, lanes, pack_lanes, rescale, weight_bits};
use super::dot4;
use super::quantized::lanes_in_order;
use crate::arch as dsp;

/// Largest magnitude of a fixed-point weight (for up to 512 positions; see [`w_max`]).
pub const W_MAX: f32 = 32767.0;

/// Largest magnitude of a fixed-point weight over `n` positions: [`W_MAX`], or less when `n` is over
/// 512, so that no `i32` sum can overflow whatever the cache bytes are (`n * w_max * 128 < 2^31`).
pub fn w_max(n: usize) -> f32 {
    // Up to 512 positions `2^24 / n - 1 >= 32767`: no division.
    if n <= 512 {
        return W_MAX;
    }
    ((1usize << 24) / n).saturating_sub(1).min(W_MAX as usize) as f32
}

/// `max|w|` of the weights, NaNs ignored (0 for none): the `max` argument of [`mix`].
#[inline(always)]
pub fn max_abs(max: f32, w: f32) -> f32 {
    let w = libm::fabsf(w);
    if w > max {
        w
    } else {
        max
    }
}

/// The weights `w_j = p_j / sum * s_j` of [`mix`] in place of the pattern `p` (as far as `scales`
/// goes), returning `max|w_j|` as [`max_abs`] gives it. Non-negative floats (and `+inf`) order as their
/// bits, so the maximum is an integer one; a sign bit or a NaN takes the float comparisons.
pub fn weights(pattern: &mut [f32], sum: f32, scales: &[f32]) -> f32 {
    let n = pattern.len().min(scales.len());
    let (pattern, scales) = (&mut pattern[..n], &scales[..n]);
    let top = weight_bits(pattern, scales, sum);
    match top <= f32::INFINITY.to_bits() {
        true => f32::from_bits(top),
        false => pattern.iter().take(n).fold(0.0, |max, w| max_abs(max, *w)),
    }
}

/// The first four bytes of `b` as a little-endian word, zeros where `b` ends.
#[inline(always)]
fn padded_word(b: &[u8]) -> u32 {
    match b {
        [_, _, _, _, ..] => dsp::word(b),
        _ => {
            let mut w = [0u8; 4];
            w.iter_mut().zip(b).for_each(|(w, b)| *w = *b);
            u32::from_le_bytes(w)
        }
    }
}

/// `z[i] = S * sum_j q_j v_i[j]`, where `w = weights` (one per position), `max = max|w|` (as
/// [`max_abs`] gives it), `S = max / w_max(n)` ([`w_max`]), `q_j = round(w_j / S)` and `v_i` starts at
/// `values[i * stride]` (the transposed cache of one head: a row of positions per output). `weights`
/// is scratch: its contents are unspecified afterwards. If `values` is shorter than that, `z` is
/// unspecified too (never a panic).
pub fn mix(weights: &mut [f32], max: f32, values: &[i8], stride: usize, z: &mut [f32]) {
    let n = weights.len();
    let (scale, inv) = (max / w_max(n), w_max(n) / max);
    let values: &[u8] = bytemuck::cast_slice(values);
    let words: &mut [u32] = bytemuck::cast_slice_mut(weights);
    let groups = n / 4;
    // In place: group g's four weights become words 2g and 2g + 1; groups before g are read.
    pack_lanes(words.get_mut(..4 * groups).unwrap_or(&mut []), inv);
    // The last `n % 4` weights, zeros after them: a group of their own when every row has the bytes
    // (stale positions, times zero) and there is room for its words, else added row by row.
    let mut tail = [0u32; 4];
    tail.iter_mut()
        .zip(words.get(4 * groups..).unwrap_or(&[]))
        .for_each(|(t, w)| *t = *w);
    let tail = (n % 4 != 0).then(|| lanes(tail, inv));
    let mut packed = 2 * groups;
    if let (Some((e, o)), true) = (tail, 4 * groups + 4 <= stride) {
        if let Some([even, odd]) = words.get_mut(packed..packed + 2) {
            (*even, *odd) = (e, o);
            packed += 2;
        }
    }
    let (packed, tail) = match words.get(..packed) {
        Some(p) if p.len() > 2 * groups => (p, None),
        p => (p.unwrap_or(&[]), tail),
    };
    let finish = |acc: i32, i: usize| {
        let acc = match tail {
            Some(t) => {
                let at = i.saturating_mul(stride).saturating_add(4 * groups);
                dsp::mac_lanes(acc, padded_word(values.get(at..).unwrap_or(&[])), t)
            }
            None => acc,
        };
        acc as f32 * scale
    };
    // Four outputs at a time, `stride` apart, in one call; the last `z.len() % 4` one by one.
    let quads = z.len() - z.len() % 4;
    let (z4, rest) = z.split_at_mut(quads);
    dot4::dot4_strided(values, stride, packed, bytemuck::cast_slice_mut(z4));
    match tail {
        None => rescale(z4, scale),
        Some(_) => {
            for (i, z) in z4.iter_mut().enumerate() {
                *z = finish(z.to_bits() as i32, i);
            }
        }
    }
    for (r, z) in rest.iter_mut().enumerate() {
        let row = values
            .get((quads + r).saturating_mul(stride)..)
            .unwrap_or(&[]);
        let mut sums = [0; 4];
        dot4::dot4_strided(row, 0, packed, &mut sums);
        *z = finish(sums[0], quads + r);
    }
}

/// [`mix`] over an int16 value cache: the same int16 weights `q_j` (with [`W_MAX`]), each output an
/// exact `i64` sum `sum_j q_j v_i[j]` times `S`. The weights become their fixed-point values in
/// place, two per word (`[q_2k, q_2k+1]`, the order of the values' words), so that each output is
/// one `SMLALD` per two positions, four outputs per pass over the weights ([`dsp::sums4_f32`]);
/// `weights` is scratch: its contents are unspecified afterwards.
pub fn mix16(weights: &mut [f32], max: f32, values: &[i16], stride: usize, z: &mut [f32]) {
    let (scale, inv) = (max / W_MAX, W_MAX / max);
    let n = weights.len();
    let words: &mut [u32] = bytemuck::cast_slice_mut(weights);
    // Groups of four weights as the matmuls' lanes (`[q0, q2], [q1, q3]`, [`pack_lanes`]) put back
    // in order (`[q0, q1], [q2, q3]`); then word `k` from weights `2k` and `2k + 1`, in increasing
    // `k`: each reads words not yet written.
    let groups = n / 4;
    pack_lanes(&mut words[..4 * groups], inv);
    lanes_in_order(&mut words[..2 * groups]);
    for k in 2 * groups..n / 2 {
        let q = |j: usize| fixed(f32::from_bits(words[j]), inv);
        words[k] = dsp::lane_word(q(2 * k), q(2 * k + 1));
    }
    let last = match n % 2 {
        1 => fixed(f32::from_bits(words[n - 1]), inv) as i64,
        _ => 0,
    };
    // The odd last weight as one more word `[q_n-1, 0]` (its slot is free): the rows' next word
    // holds value `n - 1` in its low lane.
    let mut with_last = n / 2;
    if let (1, Some(w)) = (n % 2, words.get_mut(n / 2)) {
        *w = dsp::lane_word(last as i32, 0);
        with_last += 1;
    }
    let (pairs, v) = (&words[..n / 2], &words[..with_last]);
    let q_at =
        |j: usize| (pairs.get(j / 2).map_or(0, |&w| w >> (16 * (j % 2))) as u16 as i16) as i64;
    let little = cfg!(target_endian = "little");
    // Four outputs per pass over the weights' words ([`dsp::sums4_f32`]) where the rows are whole
    // words, the same sums as `f32`; the outputs after them one by one.
    let rows = match stride % 2 == 0 && little {
        true => bytemuck::try_cast_slice::<i16, u32>(&values[..values.len() / 2 * 2]),
        false => Ok(&[][..]),
    };
    let done = match rows {
        Ok(rows) => dsp::sums4_f32(rows, stride / 2, v, z),
        Err(_) => 0,
    };
    let (z4, rest) = z.split_at_mut(done);
    z4.iter_mut().for_each(|z| *z *= scale);
    for (r, z) in rest.iter_mut().enumerate() {
        let row = values
            .get((done + r).saturating_mul(stride)..)
            .unwrap_or(&[]);
        let row = &row[..row.len().min(n)];
        let (body, tail) = row.split_at(row.len().min(2 * pairs.len()));
        let acc = match bytemuck::try_cast_slice::<i16, u32>(body) {
            Ok(v) if little => dsp::dot_lanes16(pairs, v),
            // A misaligned (or short) row: position by position, the same sum.
            _ => body
                .iter()
                .enumerate()
                .fold(0i64, |acc, (j, &v)| acc + q_at(j) * v as i64),
        };
        let acc = acc + last * tail.first().map_or(0, |&v| v as i64);
        *z = dsp::sum_to_f32(acc) * scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::lcg;
    use std::{vec, vec::Vec};

    /// A `d x n` transposed value block (row `i` at `i * stride`) and `n` weights from a seed.
    fn case(seed: u32, d: usize, n: usize, stride: usize) -> (Vec<i8>, Vec<f32>) {
        let mut state = lcg(seed);
        let mut next = || state() >> 8;
        let values = (0..d * stride)
            .map(|_| ((next() % 255) as i32 - 127) as i8)
            .collect();
        let weights = (0..n)
            .map(|_| (next() % 10_000) as f32 / 10_000.0)
            .collect();
        (values, weights)
    }

    fn f32_mix(weights: &[f32], values: &[i8], stride: usize, d: usize) -> Vec<f64> {
        (0..d)
            .map(|i| {
                (0..weights.len())
                    .map(|j| weights[j] as f64 * values[i * stride + j] as f64)
                    .sum()
            })
            .collect()
    }

    #[test]
    fn equals_the_exact_integer_sum_of_the_rounded_weights() {
        let cases = [
            (16, 1),
            (16, 3),
            (16, 4),
            (16, 37),
            (5, 64),
            (3, 9),
            (1, 2),
            (6, 10),
        ];
        for ((d, n), stride) in cases.into_iter().flat_map(|c| [(c, 64), (c, c.1)]) {
            let (values, weights) = case(d as u32 * 131 + n as u32, d, n, stride);
            let max = weights.iter().fold(0.0f32, |m, w| m.max(w.abs()));
            let mut z = vec![9.0f32; d];
            mix(&mut weights.clone(), max, &values, stride, &mut z);
            for (i, z) in z.iter().enumerate() {
                let acc: i64 = (0..n)
                    .map(|j| {
                        fixed(weights[j], w_max(n) / max) as i64 * values[i * stride + j] as i64
                    })
                    .sum();
                assert_eq!(*z, acc as f32 * (max / w_max(n)), "d {d} n {n} i {i}");
            }
        }
    }

    #[test]
    fn int16_mix_equals_the_exact_integer_sum_of_the_rounded_weights() {
        // Even and odd positions, rows as long as the weights or longer, and rows one value off the
        // words (misaligned: the value-by-value path).
        for (d, n, stride, skew) in [
            (16, 37, 64, 0),
            (16, 64, 64, 0),
            (5, 9, 9, 0),
            (3, 10, 12, 1),
            (2, 1, 1, 0),
        ] {
            let (bytes, weights) = case(d as u32 * 7 + n as u32, d, n, stride);
            let wide: Vec<i16> = (0..skew + d * stride)
                .map(|i| {
                    (bytes[i % bytes.len()] as i32 * 251 + (i % 800) as i32).clamp(-32767, 32767)
                        as i16
                })
                .collect();
            let values = &wide[skew..];
            let max = weights.iter().fold(0.0f32, |m, w| m.max(w.abs()));
            let mut z = vec![9.0f32; d];
            mix16(&mut weights.clone(), max, values, stride, &mut z);
            for (i, z) in z.iter().enumerate() {
                let acc: i64 = (0..n)
                    .map(|j| fixed(weights[j], W_MAX / max) as i64 * values[i * stride + j] as i64)
                    .sum();
                assert_eq!(
                    *z,
                    acc as f32 * (max / W_MAX),
                    "d {d} n {n} skew {skew} i {i}"
                );
            }
        }
    }

    #[test]
    fn is_within_half_a_weight_step_per_position_of_the_float_mix() {
        for seed in 0..50 {
            let (d, n, stride) = (16, 64, 64);
            let (values, mut weights) = case(seed, d, n, stride);
            // Softmax-like: a few large weights and many small ones.
            weights
                .iter_mut()
                .enumerate()
                .for_each(|(j, w)| *w *= if j % 7 == 0 { 1.0 } else { 0.01 });
            let want = f32_mix(&weights, &values, stride, d);
            let max = weights.iter().fold(0.0f32, |m, w| m.max(*w)) as f64;
            let mut z = vec![0.0f32; d];
            let max_w = weights.iter().fold(0.0, |m, w| max_abs(m, *w));
            mix(&mut weights.clone(), max_w, &values, stride, &mut z);
            for i in 0..d {
                let sum_v: f64 = (0..n).map(|j| (values[i * stride + j] as f64).abs()).sum();
                let bound = 0.5 * max / 32767.0 * sum_v * 1.0001 + 1e-6 * want[i].abs();
                let err = (z[i] as f64 - want[i]).abs();
                assert!(err <= bound, "seed {seed} i {i}: {err} > {bound}");
                // Far below the int8 rounding of the values (half a step of 1/127 of max|v|).
                assert!(err <= 1e-4 * max * sum_v, "seed {seed} i {i}");
            }
        }
    }

    #[test]
    fn weights_maximum_is_the_float_one() {
        let scales = [0.5f32, 2.0, 0.0, 1e-3, 7.0, f32::INFINITY];
        for (pattern, sum) in [
            (vec![0.25f32, 1.0, 0.5, 0.125, 0.0, 0.0], 1.75),
            (vec![1.0, 0.0, 0.0, 0.0, 1e-30, 0.5], 3.0),
            (vec![-1.0, 0.5, 0.0, 2.0, 0.0, 0.0], 1.0),
            (vec![f32::NAN, 0.5, 1.0, 0.25, 0.0, 0.0], 2.0),
            (vec![0.0, 0.5, 1.0, 0.25, 0.0, 1.0], 2.0),
            (vec![-0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 1.0),
            (vec![0.5, 0.25], 1.0),
        ] {
            let n = pattern.len().min(scales.len());
            let want: Vec<f32> = (0..n).map(|j| pattern[j] / sum * scales[j]).collect();
            let max_want = want.iter().fold(0.0, |m, w| max_abs(m, *w));
            let mut got = pattern.clone();
            let max = weights(&mut got, sum, &scales);
            assert_eq!(max.to_bits(), max_want.to_bits(), "{pattern:?}");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.to_bits(), w.to_bits());
            }
        }
    }

    #[test]
    fn long_contexts_never_overflow_and_odd_inputs_never_panic() {
        let (d, n) = (4, 2 * 512 + 6);
        let values = vec![-128i8; d * n];
        let mut weights = vec![1.0f32; n];
        let mut z = [0.0f32; 4];
        mix(&mut weights, 1.0, &values, n, &mut z);
        for z in z {
            assert!((z / (-128.0 * n as f32) - 1.0).abs() < 1e-6, "{z}");
        }
        assert_eq!(
            (w_max(512), w_max(513), w_max(1 << 25)),
            (32767.0, 32703.0, 0.0)
        );
        for weights in [
            [0.0f32; 5],
            [f32::NAN; 5],
            [f32::INFINITY; 5],
            [-1.0, 2.0, -3.0, 0.0, 1e-30],
        ] {
            let mut z = [0.0f32; 6];
            let max = weights.iter().fold(0.0, |m, w| max_abs(m, *w));
            mix(&mut weights.clone(), max, &values[..7], 2, &mut z);
            mix(&mut weights.clone(), max, &[], 2, &mut z);
        }
        let mut z = [1.0f32; 3];
        mix(&mut [0.0; 4], 0.0, &[5; 12], 4, &mut z);
        assert_eq!(z, [0.0; 3]);
    }
}
