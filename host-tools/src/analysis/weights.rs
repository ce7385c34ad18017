//! The weights circuit analysis reads, in TransformerLens shapes, as `f64` nalgebra matrices.

use anyhow::{Context, Result};
use microlens::analysis::Head;
use microlens::{Config, Model, TensorId, TensorKind};

use crate::import::layout::tl_tensor;
use crate::import::state_dict::Tensor;

/// A dense `f64` matrix.
pub type Mat = nalgebra::DMatrix<f64>;

/// One attention head's matrices (right-multiplying, as TransformerLens's `W_Q[h]` etc.; with grouped-query
/// attention `W_K` and `W_V` are those of the head's key/value head, as TransformerLens's `W_K` property
/// repeats them).
#[derive(Clone, Debug, PartialEq)]
pub struct HeadWeights {
    /// `W_Q[h]`, `[d_model, d_head]`.
    pub w_q: Mat,
    /// `W_K[h]`, `[d_model, d_head]`.
    pub w_k: Mat,
    /// `W_V[h]`, `[d_model, d_head]`.
    pub w_v: Mat,
    /// `W_O[h]`, `[d_head, d_model]`.
    pub w_o: Mat,
}

/// Every matrix of a model that circuit analysis uses.
#[derive(Clone, Debug, PartialEq)]
pub struct CircuitWeights {
    /// The architecture.
    pub config: Config,
    /// `W_E`, `[d_vocab, d_model]`.
    pub w_e: Mat,
    /// `W_U`, `[d_model, d_vocab_out]`.
    pub w_u: Mat,
    /// `[layer][head]`.
    pub heads: Vec<Vec<HeadWeights>>,
}

/// Row-major `values` as a `[rows, cols]` matrix.
fn mat(rows: usize, cols: usize, values: &[f32]) -> Mat {
    Mat::from_row_iterator(rows, cols, values.iter().map(|&v| v as f64))
}

/// Head `h` of a TL `[n_heads, rows, cols]` tensor.
fn head_slice(t: &Tensor, h: usize) -> Mat {
    let (rows, cols) = (t.shape[1], t.shape[2]);
    mat(rows, cols, &t.data[h * rows * cols..(h + 1) * rows * cols])
}

impl CircuitWeights {
    /// Reads (and dequantises) the weights of a blob.
    pub fn from_model(model: &Model<'_>) -> Result<Self> {
        let cfg = *model.config();
        let get = |kind, layer| {
            let id = if TensorKind::per_layer(kind) {
                TensorId::layer(kind, layer)
            } else {
                TensorId::global(kind)
            };
            tl_tensor(model, id).with_context(|| format!("the blob has no {id}"))
        };
        let w_e = get(TensorKind::WE, 0)?;
        let w_u = get(TensorKind::WU, 0)?;
        let mut heads = Vec::with_capacity(cfg.n_layers);
        for layer in 0..cfg.n_layers {
            let [q, k, v, o] = [
                TensorKind::WQ,
                TensorKind::WK,
                TensorKind::WV,
                TensorKind::WO,
            ]
            .map(|kind| get(kind, layer));
            let (q, k, v, o) = (q?, k?, v?, o?);
            heads.push(
                (0..cfg.n_heads)
                    .map(|h| HeadWeights {
                        w_q: head_slice(&q, h),
                        w_k: head_slice(&k, cfg.kv_head(h)),
                        w_v: head_slice(&v, cfg.kv_head(h)),
                        w_o: head_slice(&o, h),
                    })
                    .collect(),
            );
        }
        Ok(CircuitWeights {
            config: cfg,
            w_e: mat(cfg.d_vocab, cfg.d_model, &w_e.data),
            w_u: mat(cfg.d_model, cfg.d_vocab_out, &w_u.data),
            heads,
        })
    }

    /// The weights of `head`.
    pub fn head(&self, head: Head) -> &HeadWeights {
        &self.heads[head.layer][head.head]
    }

    /// Every head, layer by layer.
    pub fn all_heads(&self) -> impl Iterator<Item = Head> + '_ {
        let n = self.config.n_heads;
        (0..self.config.n_layers).flat_map(move |l| (0..n).map(move |h| Head::new(l, h)))
    }
}
