//! [`HostWeights`]: the column-blocked copies ([`Blocked`]) of one blob's matrices, per tensor slot,
//! the form in which a `Model` holds them. Built from a model by [`HostWeights::new`].

use std::vec::Vec;

use super::blocked::Blocked;
use crate::weights::Matrix;

/// A model's matrices, column-blocked for the host (16 rows per block): build once per model with
/// [`HostWeights::new`], attach with `Model::with_host`. About the size of the model in `f32`.
#[derive(Debug)]
pub struct HostWeights {
    /// The blob data it was built from (address and length), so it attaches only to that model.
    source: (usize, usize),
    /// Per tensor slot, the blocked matrix (`None` for vectors and matrices without whole blocks).
    mats: Vec<Option<Blocked>>,
}

/// The blocked copy of `m`'s whole blocks (`None` if it has none, or an uncompiled dtype).
fn blocked(m: &Matrix<'_>) -> Option<Blocked> {
    Blocked::new(m.dtype(), [m.rows(), m.cols()], m.data(), |i| m.scale(i))
}

impl HostWeights {
    /// The blocked copy of `matrices` (per tensor slot, `None` for a vector) of the blob data at
    /// `source` (address and length).
    pub(crate) fn from_matrices<'a>(
        source: (usize, usize),
        matrices: impl Iterator<Item = Option<Matrix<'a>>>,
    ) -> Self {
        let mats = matrices.map(|m| m.as_ref().and_then(blocked)).collect();
        HostWeights { source, mats }
    }

    /// Whether it was built from the blob data at `source` (address and length).
    pub(crate) fn fits(&self, source: (usize, usize)) -> bool {
        self.source == source
    }

    /// The blocked matrix of tensor slot `slot`.
    pub(crate) fn get(&self, slot: usize) -> Option<&Blocked> {
        self.mats.get(slot).and_then(Option::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::{encode_scale, DType};
    use crate::host::LANES;
    use crate::testing::lcg;
    use std::vec;

    /// Pseudo-random bytes.
    fn bytes(n: usize, seed: u32) -> Vec<u8> {
        let mut next = lcg(seed);
        (0..n).map(|_| (next() >> 24) as u8).collect()
    }

    #[test]
    fn blocked_matvec_has_the_bits_of_the_row_kernels() {
        for (dtype, rows, cols) in [
            (DType::F32, 48, 37),
            (DType::F16, 33, 64),
            (DType::I8, 32, 70),
            (DType::I4, 35, 75),
        ] {
            let n = dtype.data_len(rows, cols).unwrap();
            let mut data = bytes(n, 7 + rows as u32);
            if dtype == DType::F32 {
                // Finite values of a sensible range.
                for (i, c) in data.chunks_exact_mut(4).enumerate() {
                    let v = (i as f32 * 0.618).sin() * 3.0 / (1.0 + (i % 7) as f32);
                    c.copy_from_slice(&v.to_le_bytes());
                }
            }
            if dtype == DType::F16 {
                for c in data.chunks_exact_mut(2) {
                    c[1] &= 0x3f; // no infinities or NaNs
                }
            }
            let scales: Vec<u8> = (0..dtype.n_scales(rows, cols).unwrap())
                .flat_map(|i| encode_scale(0.25 + (i % 97) as f32 / 64.0).unwrap())
                .collect();
            let m = Matrix::from_parts(dtype, rows, cols, &data, &scales).unwrap();
            let b = blocked(&m).unwrap();
            let x: Vec<f32> = (0..cols).map(|i| (i as f32 * 1.37).cos() * 2.1).collect();
            let mut want = vec![0.0f32; rows];
            m.matvec(&x, &mut want);
            let mut got = vec![f32::NAN; rows];
            let done = b.matvec(&x, &mut got);
            assert_eq!(done, rows - rows % LANES);
            for r in 0..done {
                assert_eq!(got[r].to_bits(), want[r].to_bits(), "{dtype:?} row {r}");
                assert_eq!(m.dot(r, 0, &x).to_bits(), want[r].to_bits());
            }
            let with = m.with_blocked(Some(&b));
            let mut both = vec![f32::NAN; rows];
            with.matvec(&x, &mut both);
            for r in 0..rows {
                assert_eq!(both[r].to_bits(), want[r].to_bits(), "{dtype:?} row {r}");
            }
        }
    }
}
