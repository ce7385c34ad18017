//! Exact integer search for one block of a GPTQ row (a group, or part of one): the integers `q` (in
//! `-limit..=limit`) that minimise GPTQ's loss over the block's columns,
//! `sum_c ((x_c - q_c s) / U_cc)²`, where each column's value `x_c` is the row's after the feedback of
//! the columns before it (`x_j -= (x_c - q_c s) / U_cc * U_cj`). GPTQ takes the nearest integer at each
//! column (Babai's nearest plane); this enumerates the others too, in order of cost (Schnorr and
//! Euchner's zig-zag), dropping a branch as soon as its cost reaches the best found, so it returns the
//! closest point of the block's lattice, or the best found within `max_nodes`.

use nalgebra::DMatrix;

use microlens::encode::I4_MAX;

use super::solver::Solver;

/// The feedback rows of a block: `u(c, j)` is `U_cj` for block-local columns `c <= j`.
pub trait Feedback {
    /// `U_cj`.
    fn u(&self, c: usize, j: usize) -> f64;
}

/// What the search is allowed to try.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Largest `|q|`.
    pub limit: i8,
    /// Search-tree nodes (columns tried) at most; the best found by then is returned.
    pub max_nodes: u64,
}

/// The state of one block's depth-first search. `U` is copied row-major (`u[c * n + j]`) so that a
/// node's feedback is one contiguous, vectorised pass.
struct Search {
    scale: f64,
    /// `1 / scale`, for a first estimate of a column's centre (see [`Search::centre`]).
    inv_scale: f64,
    limit: f64,
    max_nodes: u64,
    nodes: u64,
    /// `U`, row-major, `n x n` (only `j >= c` is read).
    u: Vec<f64>,
    /// `values[k]`: the group's values as column `k` sees them (row `k` of a `n x n` table).
    values: Vec<f64>,
    q: Vec<i8>,
    best: Vec<i8>,
    best_loss: f64,
    n: usize,
}

/// Distance from the half-integers, and largest magnitude, below which [`Search::centre`] divides.
const CENTRE_MARGIN: f64 = 1.0 / (1u64 << 20) as f64;
const CENTRE_RANGE: f64 = (1u64 << 20) as f64;

impl Search {
    /// Column value `x` in steps of the scale, `x / scale`, and its floor, as the walk uses them: the
    /// floor and the comparisons `centre - down <= up - centre` between integers. `x * (1 / scale)`
    /// is within 2⁻³¹ of `x / scale` when below 2²⁰; farther than 2⁻²⁰ from every half-integer, it has
    /// the same floor and every such comparison (exactly `2 frac - m` against 0 for an integer `m`,
    /// each side rounded by at most 2⁻³²) comes out the same, so the walk is the same. Otherwise the
    /// division.
    #[inline(always)]
    fn centre(&self, x: f64) -> (f64, f64) {
        let c = x * self.inv_scale;
        let f = c.floor();
        let d = c - f;
        let safe = c.abs() < CENTRE_RANGE
            && d > CENTRE_MARGIN
            && d < 1.0 - CENTRE_MARGIN
            && (d - 0.5).abs() > CENTRE_MARGIN;
        if safe {
            (c, f)
        } else {
            let c = x / self.scale;
            (c, c.floor())
        }
    }

    /// Tries column `k`'s integers in order of cost, `partial` being the loss of the columns before it,
    /// going one column deeper through `deeper` (this same function, compiled for the host's SIMD).
    #[inline(always)]
    fn visit(&mut self, k: usize, partial: f64, deeper: impl Fn(&mut Self, usize, f64)) {
        let n = self.n;
        let x = self.values[k * n + k];
        let (ukk, limit, scale) = (self.u[k * n + k], self.limit, self.scale);
        let (centre, floor) = self.centre(x);
        // The next candidates below and above the centre, inside the box, and their errors
        // (computed ahead: the next one's division runs while this one's subtree is searched).
        let mut down = floor.min(limit);
        let mut up = (floor + 1.0).max(-limit);
        let (mut err_down, mut err_up) = ((x - down * scale) / ukk, (x - up * scale) / ukk);
        loop {
            let (down_in, up_in) = (down >= -limit, up <= limit);
            if !(down_in || up_in) {
                return;
            }
            let take_down = if down_in && up_in {
                centre - down <= up - centre
            } else {
                down_in
            };
            let (v, err) = if take_down {
                (down, err_down)
            } else {
                (up, err_up)
            };
            if take_down {
                down -= 1.0;
                err_down = (x - down * scale) / ukk;
            } else {
                up += 1.0;
                err_up = (x - up * scale) / ukk;
            }
            let cost = partial + err * err;
            // Candidates come in order of distance from the centre, so of cost: none after is better.
            if cost >= self.best_loss || self.nodes >= self.max_nodes {
                return;
            }
            self.nodes += 1;
            self.q[k] = v as i8;
            if k + 1 == n {
                self.best_loss = cost;
                self.best.copy_from_slice(&self.q);
                continue;
            }
            let (done, rest) = self.values.split_at_mut((k + 1) * n);
            let (from, to) = (&done[k * n + k + 1..k * n + n], &mut rest[k + 1..n]);
            let u = &self.u[k * n + k + 1..k * n + n];
            for ((to, from), u) in to.iter_mut().zip(from).zip(u) {
                *to = from - err * u;
            }
            deeper(self, k + 1, cost);
        }
    }

    /// The walk from column 0, with the host's widest SIMD (the same operations: no fused multiply-add).
    fn run(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { visit_avx2(self, 0, 0.0) };
        }
        visit_plain(self, 0, 0.0);
    }
}

/// [`Search::visit`] compiled for AVX2 (`roundsd` floors, 4-wide feedback).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn visit_avx2(s: &mut Search, k: usize, partial: f64) {
    s.visit(k, partial, |s, k, p| visit_avx2(s, k, p));
}

/// [`Search::visit`] for any CPU.
fn visit_plain(s: &mut Search, k: usize, partial: f64) {
    s.visit(k, partial, visit_plain);
}

/// The group's integers with the least loss at one `scale`, starting from `start` (typically GPTQ's,
/// which bounds the search), for the group's values `x` before any of its columns is rounded; returns
/// them with their loss. Never worse than `start`.
pub fn closest<F: Feedback>(
    x: &[f64],
    u: &F,
    scale: f64,
    start: &[i8],
    budget: Budget,
) -> (Vec<i8>, f64) {
    let n = x.len();
    let start_loss = loss(x, u, scale, start);
    if n == 0 || scale <= 0.0 || !scale.is_finite() {
        return (start.to_vec(), start_loss);
    }
    let mut rows = vec![0.0; n * n];
    for c in 0..n {
        for j in c..n {
            rows[c * n + j] = u.u(c, j);
        }
    }
    let mut values = vec![0.0; n * n];
    values[..n].copy_from_slice(x);
    let mut search = Search {
        scale,
        inv_scale: 1.0 / scale,
        limit: budget.limit as f64,
        max_nodes: budget.max_nodes,
        nodes: 0,
        u: rows,
        values,
        q: start.to_vec(),
        best: start.to_vec(),
        best_loss: start_loss,
        n,
    };
    search.run();
    (search.best, search.best_loss)
}

/// GPTQ's loss of integers `q` for values `x` at one `scale`, with the feedback.
pub fn loss<F: Feedback>(x: &[f64], u: &F, scale: f64, q: &[i8]) -> f64 {
    let mut x = x.to_vec();
    let mut total = 0.0;
    for (c, &v) in q.iter().enumerate() {
        let err = (x[c] - v as f64 * scale) / u.u(c, c);
        total += err * err;
        for (j, xj) in x.iter_mut().enumerate().skip(c + 1) {
            *xj -= err * u.u(c, j);
        }
    }
    total
}

/// Exact search over the blocks of one row of a [`Solver`]'s inputs.
impl Solver {
    /// Searches the integers of each block of at most [`SEARCH_WIDTH`] columns of a segment for the
    /// least loss ([`closest`]) with the columns before it as they are, keeping a block's new
    /// integers only where they lower the whole row's loss; returns whether any changed.
    pub(super) fn search(
        &self,
        w: &[f64],
        q: &mut [i8],
        scales: &[f32],
        segment: usize,
        budget: Budget,
    ) -> bool {
        let (mut work, mut changed) = (w.to_vec(), false);
        let mut loss = self.loss(w, q, scales, segment);
        for start in (0..self.n).step_by(SEARCH_WIDTH.min(segment)) {
            let cols = start..(start + SEARCH_WIDTH.min(segment)).min(self.n);
            let scale = scales[start / segment];
            let block = GroupFeedback { u: &self.u, start };
            let x = &work[cols.clone()];
            let (found, _) = closest(x, &block, scale as f64, &q[cols.clone()], budget);
            if found[..] != q[cols.clone()] {
                let mut next = q.to_vec();
                next[cols.clone()].copy_from_slice(&found);
                let next_loss = self.loss(w, &next, scales, segment);
                if next_loss < loss {
                    (loss, changed) = (next_loss, true);
                    q.copy_from_slice(&next);
                }
            }
            for c in cols {
                let err = self.error(&work, c, q[c], scale);
                self.feed_back(&mut work, c, err);
            }
        }
        changed
    }
}

impl Budget {
    /// An int8 row's search (blocks of up to 64 columns in `-127..=127`). Nearly every int8 block
    /// reaches any node budget and keeps improving to its end, but the models do not: 200,000 nodes
    /// (ten times the time) left the fixtures' int8 mean KL within -7% to +3% of 20,000's, both
    /// directions, the size of calibration noise.
    pub const INT8: Budget = Budget {
        limit: 127,
        max_nodes: 20_000,
    };
    /// An int4 row's search (groups of 32 in `-7..=7`): most int4 searches end before 200,000 nodes
    /// (1,504 of the shipped model's 1,640 blocks), so it costs little; 25 times more moved the
    /// fixtures' mean KL by -6% to +3%.
    pub const INT4: Budget = Budget {
        limit: I4_MAX as i8,
        max_nodes: 200_000,
    };
}

/// Columns searched together in [`Solver::search`], at most (a block's search keeps a table of
/// `width²` values and recurses `width` deep): an int4 group, or an int8 row of up to 64 inputs (the
/// fixtures' except `hf_gpt2`'s 128-input `W_out`, searched as two blocks).
const SEARCH_WIDTH: usize = 64;
/// Rounds of search then refinement of an int4 row, at most.
pub(super) const SEARCH_ROUNDS: usize = 3;

/// The feedback rows of one block of columns, from column `start` of a solver's `U`.
struct GroupFeedback<'a> {
    u: &'a DMatrix<f64>,
    start: usize,
}

impl Feedback for GroupFeedback<'_> {
    fn u(&self, c: usize, j: usize) -> f64 {
        self.u[(self.start + c, self.start + j)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    struct Dense(Vec<f64>, usize);
    impl Feedback for Dense {
        fn u(&self, c: usize, j: usize) -> f64 {
            self.0[c * self.1 + j]
        }
    }

    /// A random upper-triangular `U` with a positive diagonal.
    fn random_u(n: usize, rng: &mut ChaCha8Rng) -> Dense {
        let mut u = vec![0.0; n * n];
        for c in 0..n {
            u[c * n + c] = rng.random_range(0.3..1.5);
            for j in c + 1..n {
                u[c * n + j] = rng.random_range(-0.6..0.6);
            }
        }
        Dense(u, n)
    }

    #[test]
    fn finds_the_brute_force_optimum_in_the_box() {
        let mut improved = 0;
        for seed in 0..40 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let n = 5;
            let u = random_u(n, &mut rng);
            let x: Vec<f64> = (0..n).map(|_| rng.random_range(-3.5..3.5)).collect();
            let (scale, limit) = (1.0, 3i8);
            let nearest: Vec<i8> = x.iter().map(|v| v.round().clamp(-3.0, 3.0) as i8).collect();
            let budget = Budget {
                limit,
                max_nodes: u64::MAX,
            };
            let (q, l) = closest(&x, &u, scale, &nearest, budget);
            assert!((l - loss(&x, &u, scale, &q)).abs() < 1e-12);
            let mut best = f64::INFINITY;
            for code in 0..7usize.pow(n as u32) {
                let cand: Vec<i8> = (0..n)
                    .map(|k| (code / 7usize.pow(k as u32) % 7) as i8 - 3)
                    .collect();
                best = best.min(loss(&x, &u, scale, &cand));
            }
            assert!((l - best).abs() < 1e-9, "seed {seed}: {l} vs {best}");
            assert!(q.iter().all(|v| v.abs() <= limit));
            improved += (l < loss(&x, &u, scale, &nearest) - 1e-12) as usize;
        }
        assert!(improved > 0);
    }

    #[test]
    fn a_node_budget_returns_the_best_found_and_never_worse_than_the_start() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let n = 32;
        let u = random_u(n, &mut rng);
        let x: Vec<f64> = (0..n).map(|_| rng.random_range(-7.0..7.0)).collect();
        let start = vec![0i8; n];
        let start_loss = loss(&x, &u, 1.0, &start);
        let mut last = start_loss;
        for max_nodes in [0, 10, 1_000, 100_000] {
            let budget = Budget {
                limit: 7,
                max_nodes,
            };
            let (q, l) = closest(&x, &u, 1.0, &start, budget);
            assert!(l <= last + 1e-12 && (l - loss(&x, &u, 1.0, &q)).abs() < 1e-9);
            last = l;
        }
        assert!(last < start_loss);
    }
}
