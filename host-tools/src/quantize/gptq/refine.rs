//! Coordinate-descent refinement of a rounded row: integer moves of ±1 and `f16` scale moves, each taken
//! only when it lowers GPTQ's loss.

use microlens::blob::scale_up;
use nalgebra::DVector;

use super::solver::{residual, Solver};

impl Solver {
    /// Lowers [the loss](Solver::loss) of a rounded row by coordinate descent, never raising it: moves
    /// of one integer by ±1 (within `-limit..=limit`) while one helps, then each segment's scale (its
    /// integers kept) to the better `f16` either side of its least-squares optimum, and again while a
    /// scale moved. `g = H (w - ŵ)` is kept up to date: moving `ŵ_i` by `d` changes the loss by
    /// `d² H_ii - 2 d g_i`.
    pub(super) fn refine(
        &self,
        w: &[f64],
        q: &mut [i8],
        scales: &mut [f32],
        segment: usize,
        limit: i8,
    ) {
        let (n, h) = (self.n, &self.h);
        let limit = limit as i16;
        let mut g = h * residual(w, q, scales, segment);
        for _ in 0..REFINE_ROUNDS {
            for _ in 0..REFINE_PASSES {
                let mut moved = false;
                for i in 0..n {
                    let s = scales[i / segment] as f64;
                    for step in [1i16, -1] {
                        let (next, d) = (q[i] as i16 + step, step as f64 * s);
                        if next.abs() <= limit && d * d * h[(i, i)] - 2.0 * d * g[i] < 0.0 {
                            q[i] = next as i8;
                            g.axpy(-d, &h.column(i), 1.0);
                            moved = true;
                            break;
                        }
                    }
                }
                if !moved {
                    break;
                }
            }
            let mut rescaled = false;
            for (k, scale) in scales.iter_mut().enumerate() {
                let cols = k * segment..((k + 1) * segment).min(n);
                let mut hq = DVector::zeros(n);
                for c in cols.clone() {
                    hq.axpy(q[c] as f64, &h.column(c), 1.0);
                }
                // With `r` the residual without this segment, the loss is `rᵀHr - 2 s qᵀHr + s² qᵀHq`.
                let qhq: f64 = cols.clone().map(|c| q[c] as f64 * hq[c]).sum();
                let old = *scale as f64;
                let qhr = cols.map(|c| q[c] as f64 * g[c]).sum::<f64>() + old * qhq;
                let Some(up) = (qhq > 0.0).then(|| scale_up((qhr / qhq) as f32)).flatten() else {
                    continue;
                };
                let down = half::f16::from_bits(half::f16::from_f32(up).to_bits() - 1).to_f32();
                let change = |s: f64| (s * s - old * old) * qhq - 2.0 * (s - old) * qhr;
                let best = [up, down]
                    .into_iter()
                    .filter(|&s| s > 0.0)
                    .map(|s| (change(s as f64), s))
                    .min_by(|a, b| a.0.total_cmp(&b.0));
                if let Some((_, s)) = best.filter(|b| b.0 < 0.0) {
                    g.axpy(old - s as f64, &hq, 1.0);
                    *scale = s;
                    rescaled = true;
                }
            }
            if !rescaled {
                break;
            }
        }
    }
}

/// Coordinate passes over a row per round of [`Solver::refine`], at most.
const REFINE_PASSES: usize = 20;
/// Rounds of passes and rescaling in [`Solver::refine`], at most.
const REFINE_ROUNDS: usize = 5;
