//! TransformerLens shapes <-> blob layout, both ways.
//!
//! TL right-multiplies (`y = x @ W`, `W_Q` is `[n_heads, d_model, d_head]`); a blob stores every matrix
//! out-major (`[outputs, inputs]`, see `microlens::tensors`). Every conversion is either the identity or a
//! batch of transposes: `W_Q/W_K/W_V` transpose each head (`[h, m, d] -> [h, d, m] = [h*d, m]`; `W_K`
//! and `W_V` have `n_key_value_heads` heads, TL's `_W_K`/`_W_V` with grouped-query attention), `W_O`
//! transposes `[h*d, m] -> [m, h*d]`, `W_gate`, `W_in`, `W_out` and `W_U` transpose their one matrix.
//! The shortformer tables `pos_Q`/`pos_K` have no TL counterpart; their TL-style shape here is
//! `[n_ctx, n_heads, d_head]`, like `hook_q` (`q[pos, head, :]`).

use anyhow::{ensure, Context, Result};
use microlens::tensors::Catalogue;
use microlens::{Config, Model, TensorId, TensorKind};

use crate::import::state_dict::{StateDict, Tensor};

/// TL shape of a tensor of `kind` for `cfg` (derived from the blob shape `kind.shape(cfg)`).
pub fn tl_shape(kind: TensorKind, cfg: &Config) -> Vec<usize> {
    let (m, h, d, kv) = (cfg.d_model, cfg.n_heads, cfg.d_head, cfg.n_key_value_heads);
    let [rows, cols] = kind.shape(cfg);
    match kind {
        TensorKind::WQ => vec![h, m, d],
        TensorKind::WK | TensorKind::WV => vec![kv, m, d],
        TensorKind::BQ => vec![h, d],
        TensorKind::BK | TensorKind::BV => vec![kv, d],
        TensorKind::WO => vec![h, d, m],
        TensorKind::PosQ => vec![cfg.n_ctx, h, d],
        TensorKind::PosK => vec![cfg.n_ctx, kv, d],
        TensorKind::WE | TensorKind::WPos => vec![rows, cols],
        TensorKind::WGate | TensorKind::WIn | TensorKind::WOut | TensorKind::WU => vec![cols, rows],
        _ => vec![cols],
    }
}

/// `[batch, rows, cols]` of the TL tensor that is transposed (per batch) into the blob, `None` for the
/// identity.
fn tl_transpose(kind: TensorKind, cfg: &Config) -> Option<[usize; 3]> {
    let (m, a, f) = (cfg.d_model, cfg.d_attn(), cfg.d_mlp_or_zero());
    match kind {
        TensorKind::WQ => Some([cfg.n_heads, m, cfg.d_head]),
        TensorKind::WK | TensorKind::WV => Some([cfg.n_key_value_heads, m, cfg.d_head]),
        TensorKind::WO => Some([1, a, m]),
        TensorKind::WGate | TensorKind::WIn => Some([1, m, f]),
        TensorKind::WOut => Some([1, f, m]),
        TensorKind::WU => Some([1, m, cfg.d_vocab_out]),
        _ => None,
    }
}

/// Transposes each of `batch` row-major `[rows, cols]` matrices: `out[b][c][r] = x[b][r][c]`.
pub(crate) fn transpose([batch, rows, cols]: [usize; 3], x: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for b in 0..batch {
        let (src, dst) = (
            &x[b * rows * cols..(b + 1) * rows * cols],
            &mut out[b * rows * cols..(b + 1) * rows * cols],
        );
        for r in 0..rows {
            for c in 0..cols {
                dst[c * rows + r] = src[r * cols + c];
            }
        }
    }
    out
}

/// TL-layout values of `kind` -> blob-layout `[rows, cols]` values.
pub fn tl_to_blob(kind: TensorKind, cfg: &Config, tl: &[f32]) -> Vec<f32> {
    match tl_transpose(kind, cfg) {
        Some(dims) => transpose(dims, tl),
        None => tl.to_vec(),
    }
}

/// Blob-layout values of `kind` -> TL-layout values (the inverse of [`tl_to_blob`]).
pub fn blob_to_tl(kind: TensorKind, cfg: &Config, blob: &[f32]) -> Vec<f32> {
    match tl_transpose(kind, cfg) {
        Some([batch, rows, cols]) => transpose([batch, cols, rows], blob),
        None => blob.to_vec(),
    }
}

/// Checks that `tensor` has the TL shape of `id` under `cfg`, naming the tensor if not.
pub fn check_tl_shape(id: TensorId, cfg: &Config, tensor: &Tensor) -> Result<()> {
    let expected = tl_shape(id.kind, cfg);
    ensure!(
        tensor.shape == expected,
        "tensor {id} has shape {:?}, the config needs {expected:?}",
        tensor.shape
    );
    Ok(())
}

/// The tensor `id` of a blob in TL shape, dequantised (`None` if the model has no such tensor).
pub fn tl_tensor(model: &Model<'_>, id: TensorId) -> Option<Tensor> {
    let cfg = model.config();
    let [rows, cols] = id.shape(cfg);
    let mut blob = vec![0.0; rows * cols];
    if id.kind.is_matrix() {
        let m = model.matrix(id)?;
        for (r, row) in blob.chunks_exact_mut(cols).enumerate() {
            m.row_into(r, row);
        }
    } else {
        blob.iter_mut()
            .zip(model.vector(id)?.iter())
            .for_each(|(o, v)| *o = v);
    }
    Some(Tensor {
        shape: tl_shape(id.kind, cfg),
        data: blob_to_tl(id.kind, cfg, &blob),
    })
}

/// Every tensor of a blob under its TL name, in TL shape, dequantised.
pub fn tl_state_dict(model: &Model<'_>) -> Result<StateDict> {
    Catalogue::new(model.config())
        .ids()
        .map(|id| {
            Ok((
                id.to_string(),
                tl_tensor(model, id).with_context(|| format!("blob has no tensor {id}"))?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn w_q_and_w_o_layouts() {
        let cfg = Config::new(1, 3, 2, 2, 5, 4, None);
        // W_Q[h][c][i] = 100h + 10c + i; blob row h*d_head + i, column c.
        let tl: Vec<f32> = (0..2)
            .flat_map(|h| {
                (0..3).flat_map(move |c| (0..2).map(move |i| (100 * h + 10 * c + i) as f32))
            })
            .collect();
        let blob = tl_to_blob(TensorKind::WQ, &cfg, &tl);
        assert_eq!(blob[(2 + 1) * 3 + 2], 121.0);
        assert_eq!(blob_to_tl(TensorKind::WQ, &cfg, &blob), tl);
        // W_O[h][i][r]: blob row r, column h*d_head + i.
        let tl: Vec<f32> = (0..12).map(|x| x as f32).collect();
        let blob = tl_to_blob(TensorKind::WO, &cfg, &tl);
        let (h, i, r) = (1, 0, 2);
        assert_eq!(blob[r * 4 + h * 2 + i], tl[(h * 2 + i) * 3 + r]);
        assert_eq!(blob_to_tl(TensorKind::WO, &cfg, &blob), tl);
    }
}
