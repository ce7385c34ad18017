//! The second moment GPTQ rounds the lookup tables `W_E` and `W_pos` against. Their rows are not
//! multiplied by an input but added to the residual stream, so what matters is how far a row's rounding
//! error `e` moves what reads the stream: `W e` for every reader `W` (`W_Q`, `W_K`, `W_V`, `W_in` of
//! every block, `W_U`). GPTQ with `H = sum_W Wᵀ W / tr(Wᵀ W)` (each reader weighted equally) minimises
//! that sum; with no reader it is the identity, which is nearest rounding.

use anyhow::{anyhow, Result};
use microlens::tensors::Catalogue;
use microlens::{Model, TensorKind};

use super::gptq::{Solver, DAMPING};
use super::matrix_values;

/// Whether `kind` is a table whose rows are added to the residual stream.
pub fn is_residual_table(kind: TensorKind) -> bool {
    matches!(kind, TensorKind::WE | TensorKind::WPos)
}

/// `sum_W Wᵀ W / tr(Wᵀ W)` over the matrices of `model` that read the residual stream, `d_model x
/// d_model` row-major.
pub fn reader_moment(model: &Model<'_>) -> Result<Vec<f64>> {
    let cfg = model.config();
    let n = cfg.d_model;
    let mut h = vec![0.0f64; n * n];
    let catalogue = Catalogue::new(cfg);
    let readers = catalogue.ids().filter(|id| {
        use TensorKind::*;
        matches!(id.kind, WQ | WK | WV | WIn | WU)
    });
    for id in readers {
        let m = model
            .matrix(id)
            .ok_or_else(|| anyhow!("the model has no tensor {id}"))?;
        let w: Vec<f64> = matrix_values(&m).iter().map(|&v| v as f64).collect();
        let w = nalgebra::DMatrix::from_row_slice(m.rows(), n, &w);
        let gram = w.transpose() * w;
        let trace = gram.trace();
        if trace > 0.0 {
            for i in 0..n {
                for j in 0..n {
                    h[i * n + j] += gram[(i, j)] / trace;
                }
            }
        }
    }
    Ok(h)
}

/// The solver for the residual tables of `model`.
pub fn solver(model: &Model<'_>) -> Result<Solver> {
    Solver::new(&reader_moment(model)?, model.config().d_model, DAMPING)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::convert_state_dict;
    use crate::encode::F32Encoder;
    use crate::fold::ProcessingOptions;
    use crate::tests::random_model::{config, state_dict};
    use microlens::{Normalization, Positional, TensorId};

    #[test]
    fn readers_are_weighted_equally() {
        let cfg = config(Normalization::LNPre, Positional::Standard, true);
        let blob = convert_state_dict(
            state_dict(&cfg, 2),
            &cfg,
            &ProcessingOptions::none(),
            &F32Encoder,
        )
        .unwrap()
        .blob;
        let model = Model::from_bytes(&blob).unwrap();
        let h = reader_moment(&model).unwrap();
        let n = cfg.d_model;
        // 2 layers x (W_Q, W_K, W_V, W_in) + W_U, each of trace 1.
        let trace: f64 = (0..n).map(|i| h[i * n + i]).sum();
        assert!((trace - 9.0).abs() < 1e-9, "{trace}");
        assert!((0..n).all(|i| (0..n).all(|j| (h[i * n + j] - h[j * n + i]).abs() < 1e-12)));
        assert!(is_residual_table(TensorId::global(TensorKind::WE).kind));
        assert!(!is_residual_table(TensorKind::PosQ));
    }
}
