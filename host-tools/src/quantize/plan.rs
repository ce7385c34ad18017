//! What a blob's matrices are stored as and rounded against, by its storage type and activations.
//!
//! W8A16 (`--dtype i8 --activations i16`, with or without `--kv i16`) rounds its int8 matrices
//! against the output Fisher as well as their inputs ([`super::gptq::encode_gptq_rows`]), and may
//! keep its lookup tables (`W_E`, `W_pos`, the shortformer's `pos_Q`/`pos_K`) in `f16`
//! (`--tables f16`): their rows are read, not multiplied by an activation, so no matmul runs on them,
//! and their int8 errors (one per token or position, which no later matrix can compensate) are up to
//! half of the int8 weights' mean KL on the fixtures. Every other storage type keeps one type for
//! every matrix and rounds each matrix against its inputs alone.

use microlens::blob::Activations;
use microlens::DType;

/// How the matrices of a blob are stored and rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The matrices read by a matmul (`W_Q`, `W_K`, `W_V`, `W_O`, `W_in`, `W_out`, `W_U`).
    pub matrices: DType,
    /// The lookup tables (`W_E`, `W_pos`, `pos_Q`, `pos_K`).
    pub tables: DType,
    /// Whether GPTQ couples a matrix's rows through the output Fisher of what they write (the loss
    /// `tr(F ΔW H ΔWᵀ)` instead of `tr(ΔW H ΔWᵀ)`).
    pub output_fisher: bool,
}

impl Plan {
    /// The default plan of a blob of `dtype` matrices running with `activations`: one type for every
    /// matrix, the rows coupled through the output Fisher for W8A16 (int8 matrices, int16
    /// activations).
    pub fn of(dtype: DType, activations: Activations) -> Plan {
        Plan {
            matrices: dtype,
            tables: dtype,
            output_fisher: is_w8a16(dtype, activations),
        }
    }

    /// [`Plan::of`] with the lookup tables stored as `tables` (`None`: as the other matrices), which
    /// only W8A16 may choose, as `f16` or `i8`.
    pub fn with_tables(
        dtype: DType,
        activations: Activations,
        tables: Option<DType>,
    ) -> anyhow::Result<Plan> {
        let plan = Plan::of(dtype, activations);
        match tables {
            None => Ok(plan),
            Some(t @ (DType::F16 | DType::I8 | DType::I8G)) if is_w8a16(dtype, activations) => {
                Ok(Plan { tables: t, ..plan })
            }
            Some(t) => anyhow::bail!(
                "--tables {} needs --dtype i8 or i8g with --activations i16 and is f16, i8 or i8g",
                t.name()
            ),
        }
    }

    /// The storage type of matrix `kind`.
    pub fn dtype_of(&self, kind: microlens::TensorKind) -> DType {
        if super::tables::is_table(kind) {
            self.tables
        } else {
            self.matrices
        }
    }
}

/// Whether `dtype` matrices with `activations` are W8A16 (int8 weights, one scale per row or per group
/// of 8).
fn is_w8a16(dtype: DType, activations: Activations) -> bool {
    matches!(dtype, DType::I8 | DType::I8G)
        && matches!(activations, Activations::I16 | Activations::I16Kv16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use microlens::TensorKind;

    #[test]
    fn only_w8a16_may_keep_its_tables_in_f16() {
        for act in [Activations::I16, Activations::I16Kv16] {
            assert_eq!(Plan::of(DType::I8, act).dtype_of(TensorKind::WE), DType::I8);
            let p = Plan::with_tables(DType::I8, act, Some(DType::F16)).unwrap();
            assert_eq!(p.dtype_of(TensorKind::WE), DType::F16);
            assert_eq!(p.dtype_of(TensorKind::PosK), DType::F16);
            assert_eq!(p.dtype_of(TensorKind::WU), DType::I8);
            assert!(p.output_fisher);
            assert!(Plan::with_tables(DType::I8, act, Some(DType::F32)).is_err());
        }
        assert!(Plan::with_tables(DType::I8, Activations::I8, Some(DType::F16)).is_err());
        assert!(Plan::with_tables(DType::F16, Activations::F32, Some(DType::F16)).is_err());
        for (dtype, act) in [
            (DType::I8, Activations::I8),
            (DType::I8, Activations::F32),
            (DType::I4, Activations::I8),
            (DType::F16, Activations::F32),
        ] {
            let p = Plan::of(dtype, act);
            assert_eq!(
                (p.tables, p.matrices, p.output_fisher),
                (dtype, dtype, false)
            );
        }
    }
}
