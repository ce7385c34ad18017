//! Distances between two models' outputs, in `f64`: KL divergence of next-token distributions,
//! Jensen-Shannon divergence of attention rows, arg-max and cross-entropy.

/// `log_softmax(x)` in `f64`: `x_i - max - ln(sum_j e^(x_j - max))`.
pub fn log_softmax(x: &[f32]) -> Vec<f64> {
    let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let lse = max + x.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
    x.iter().map(|&v| v as f64 - lse).collect()
}

/// `KL(P || Q) = sum_i p_i (ln p_i - ln q_i)` in nats, from log-probabilities.
pub fn kl(log_p: &[f64], log_q: &[f64]) -> f64 {
    log_p
        .iter()
        .zip(log_q)
        .map(|(&lp, &lq)| {
            if lp == f64::NEG_INFINITY {
                0.0
            } else {
                lp.exp() * (lp - lq)
            }
        })
        .sum()
}

/// `JS(P, Q) = (KL(P || M) + KL(Q || M)) / 2` with `M = (P + Q) / 2`, in nats (at most `ln 2`), of two
/// probability rows.
pub fn js(p: &[f32], q: &[f32]) -> f64 {
    let half_kl = |a: f64, m: f64| if a > 0.0 { a * (a / m).ln() } else { 0.0 };
    p.iter()
        .zip(q)
        .map(|(&a, &b)| {
            let (a, b) = (a.max(0.0) as f64, b.max(0.0) as f64);
            let m = 0.5 * (a + b);
            0.5 * (half_kl(a, m) + half_kl(b, m))
        })
        .sum()
}

/// Index of the largest value (the first of equals).
pub fn argmax(x: &[f32]) -> usize {
    x.iter()
        .enumerate()
        .fold(0, |best, (i, v)| if *v > x[best] { i } else { best })
}

/// Indices of the largest value and of the second largest (the first of equals; `None` for fewer than
/// two values).
pub fn top2(x: &[f32]) -> (usize, Option<usize>) {
    let best = argmax(x);
    let second = (0..x.len())
        .filter(|&i| i != best)
        .fold(None, |s: Option<usize>, i| match s {
            Some(j) if x[j] >= x[i] => Some(j),
            _ => Some(i),
        });
    (best, second)
}

/// How far the largest value is ahead of the second largest (`0` for fewer than two values): the
/// logit change that can flip an arg-max.
pub fn top1_margin(x: &[f32]) -> f64 {
    match top2(x) {
        (best, Some(second)) => x[best] as f64 - x[second] as f64,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kl_and_js_of_known_distributions() {
        let (p, q) = (log_softmax(&[0.0, 0.0]), log_softmax(&[(3.0f32).ln(), 0.0]));
        // KL([.5, .5] || [.75, .25]) = .5 ln(.5/.75) + .5 ln(.5/.25).
        let want = 0.5 * (0.5f64 / 0.75).ln() + 0.5 * 2f64.ln();
        assert!((kl(&p, &q) - want).abs() < 1e-7, "ln 3 is rounded to f32");
        assert_eq!(kl(&p, &p), 0.0);
        assert!((js(&[1.0, 0.0], &[0.0, 1.0]) - 2f64.ln()).abs() < 1e-12);
        assert_eq!(js(&[0.3, 0.7], &[0.3, 0.7]), 0.0);
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0]), 1);
        assert_eq!(top1_margin(&[1.0, 3.0, 3.0, -1.0]), 0.0);
        assert_eq!(top1_margin(&[1.0, 3.5, 3.0, -1.0]), 0.5);
        assert_eq!(top1_margin(&[2.0]), 0.0);
    }
}
