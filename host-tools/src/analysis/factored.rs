//! A low-rank matrix kept as a product `M = A B` (TransformerLens's `FactoredMatrix`): norms, eigenvalues,
//! rows and top entries are computed through the small inner dimension, never by building `M`.

use nalgebra::{Complex, Schur};

use super::weights::Mat;

/// `M = A B`, `A` `[rows, inner]`, `B` `[inner, cols]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Factored {
    /// Left factor.
    pub a: Mat,
    /// Right factor.
    pub b: Mat,
}

/// One entry of a matrix: `M[row, col] = value`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Entry {
    /// Row (e.g. the destination token of a QK circuit).
    pub row: usize,
    /// Column.
    pub col: usize,
    /// Value.
    pub value: f64,
}

impl Factored {
    /// `A B`; panics if the inner dimensions differ.
    pub fn new(a: Mat, b: Mat) -> Self {
        assert_eq!(
            a.ncols(),
            b.nrows(),
            "inner dimensions of a factored matrix"
        );
        Factored { a, b }
    }

    /// `[rows, cols]` of `M`.
    pub fn shape(&self) -> (usize, usize) {
        (self.a.nrows(), self.b.ncols())
    }

    /// `M^T = B^T A^T`.
    pub fn transpose(&self) -> Factored {
        Factored::new(self.b.transpose(), self.a.transpose())
    }

    /// `M N`, kept factored through the smaller inner dimension.
    pub fn then(&self, next: &Factored) -> Factored {
        let middle = &self.b * &next.a;
        if self.a.ncols() <= next.b.nrows() {
            Factored::new(self.a.clone(), middle * &next.b)
        } else {
            Factored::new(&self.a * middle, next.b.clone())
        }
    }

    /// `L M R` for plain matrices on either side (`W_E M W_U`).
    pub fn sandwich(&self, left: &Mat, right: &Mat) -> Factored {
        Factored::new(left * &self.a, &self.b * right)
    }

    /// Frobenius norm: `||A B||_F^2 = tr((A^T A)(B B^T))`, through the inner dimension.
    pub fn norm(&self) -> f64 {
        let gram_a = self.a.transpose() * &self.a;
        let gram_b = &self.b * self.b.transpose();
        gram_a.component_mul(&gram_b).sum().max(0.0).sqrt()
    }

    /// The non-zero spectrum of a square `M`: the eigenvalues of `B A` (`[inner, inner]`), as
    /// TransformerLens's `FactoredMatrix.eigenvalues`. Panics if `M` is not square.
    pub fn eigenvalues(&self) -> Vec<Complex<f64>> {
        assert_eq!(
            self.a.nrows(),
            self.b.ncols(),
            "eigenvalues of a non-square matrix"
        );
        let small = &self.b * &self.a;
        match Schur::try_new(small.clone(), f64::EPSILON, 10_000) {
            Some(s) => s.complex_eigenvalues().iter().copied().collect(),
            None => small.complex_eigenvalues().iter().copied().collect(),
        }
    }

    /// Row `i` of `M`.
    pub fn row(&self, i: usize) -> Vec<f64> {
        (self.a.row(i) * &self.b).iter().copied().collect()
    }

    /// The `k` largest entries of `M` (or the `k` most negative with `largest = false`), computed row by
    /// row (memory `O(cols + k)`), best first, ties broken by position.
    pub fn top_entries(&self, k: usize, largest: bool) -> Vec<Entry> {
        let sign = if largest { 1.0 } else { -1.0 };
        let k = k.min(self.a.nrows().saturating_mul(self.b.ncols()));
        let mut best: Vec<Entry> = Vec::with_capacity(k + 1);
        for row in 0..self.a.nrows() {
            for (col, &v) in self.row(row).iter().enumerate() {
                let worst = best.last().map_or(f64::NEG_INFINITY, |e| sign * e.value);
                if best.len() < k || sign * v > worst {
                    let at = best.partition_point(|e| sign * e.value >= sign * v);
                    best.insert(at, Entry { row, col, value: v });
                    best.truncate(k);
                }
            }
        }
        best
    }

    /// The `k` largest entries of row `i`, as `(col, value)`, best first.
    pub fn top_in_row(&self, i: usize, k: usize) -> Vec<(usize, f64)> {
        let mut r: Vec<(usize, f64)> = self.row(i).into_iter().enumerate().collect();
        r.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
        r.truncate(k);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rows: usize, cols: usize, f: impl Fn(usize, usize) -> f64) -> Mat {
        Mat::from_fn(rows, cols, f)
    }

    #[test]
    fn matches_the_dense_product() {
        let a = m(5, 2, |i, j| {
            (i as f64 - 2.0) * 0.7 + j as f64 * 1.3 - 0.2 * (i * j) as f64
        });
        let b = m(2, 5, |i, j| ((i + 2 * j) as f64).sin());
        let f = Factored::new(a.clone(), b.clone());
        let dense = &a * &b;
        assert!((f.norm() - dense.norm()).abs() < 1e-12);
        assert_eq!(f.row(3), dense.row(3).iter().copied().collect::<Vec<_>>());
        let top = f.top_entries(3, true);
        let mut all: Vec<f64> = dense.iter().copied().collect();
        all.sort_by(|x, y| y.total_cmp(x));
        assert_eq!(top.iter().map(|e| e.value).collect::<Vec<_>>(), all[..3]);
        assert_eq!(dense[(top[0].row, top[0].col)], top[0].value);
        let bottom = f.top_entries(2, false);
        assert_eq!(bottom[0].value, all[all.len() - 1]);
        // Non-zero eigenvalues of A B are those of B A.
        let dense_ev = dense.complex_eigenvalues();
        for e in f.eigenvalues() {
            assert!(
                dense_ev.iter().any(|d| (d - e).norm() < 1e-8),
                "{e} not in {dense_ev}"
            );
        }
        let g = Factored::new(
            m(5, 3, |i, j| (i * j) as f64 - 1.0),
            m(3, 4, |i, j| (i + j) as f64),
        );
        assert!(
            ((&a * &b * &g.a * &g.b) - {
                let p = f.then(&g);
                &p.a * &p.b
            })
            .norm()
                < 1e-9
        );
    }
}
