//! GPTQ onto the `f16` grid: each value to its nearest `f16` after the feedback of the columns before it.

use super::solver::Solver;

impl Solver {
    /// Rounds one row to `f16`, in the solver's order, each value to its nearest `f16` after the
    /// feedback of the columns before it; `None` if a value leaves the `f16` range.
    pub(super) fn row_f16(&self, w: &[f32]) -> Option<Vec<half::f16>> {
        let mut work: Vec<f64> = self.order.iter().map(|&c| w[c] as f64).collect();
        let mut out = vec![half::f16::ZERO; self.n];
        for c in 0..self.n {
            let x = work[c];
            let q = half::f16::from_f64(x);
            if !q.is_finite() {
                return None;
            }
            out[self.order[c]] = q;
            self.feed_back(&mut work, c, (x - q.to_f64()) / self.u[(c, c)]);
        }
        Some(out)
    }
}
