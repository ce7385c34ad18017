//! Shortformer positions as per-layer tables, so that LayerNorm folding stays exact.
//!
//! A shortformer adds `W_pos[pos]` after `ln1`, to the query and key inputs only:
//! `q_h = (ln1(x) + W_pos[pos]) W_Q[h] + b_Q[h]`. Folding `ln1.w` into `W_Q` would also scale the positional
//! term, which is why TransformerLens turns folding off for these models. Splitting the positional term
//! out as `pos_Q[pos, h] = W_pos[pos] @ W_Q[h]` (and `pos_K`), computed from the original, unprocessed
//! `W_pos` and `W_Q`/`W_K`, leaves `q_h = ln1(x) W_Q[h] + b_Q[h] + pos_Q[pos, h]`, whose first two terms
//! fold and centre as usual.

use anyhow::Result;
use microlens::{Config, TensorId, TensorKind};

use crate::import::state_dict::{StateDict, Tensor};

/// Adds `blocks.L.attn.pos_Q` (`[n_ctx, n_heads, d_head]`) and `pos_K` (`[n_ctx, n_key_value_heads,
/// d_head]`) computed from the (unprocessed) `W_pos`, `W_Q` and `W_K` in `sd`. Must run before any
/// processing.
pub fn add_positional_tables(sd: &mut StateDict, cfg: &Config) -> Result<()> {
    let (m, d) = (cfg.d_model, cfg.d_head);
    let w_pos = sd.get("pos_embed.W_pos")?.data.clone();
    for l in 0..cfg.n_layers {
        for (w, table, h) in [
            (TensorKind::WQ, TensorKind::PosQ, cfg.n_heads),
            (TensorKind::WK, TensorKind::PosK, cfg.n_key_value_heads),
        ] {
            let w = &sd.get(&TensorId::layer(w, l).to_string())?.data;
            let mut out = Tensor::zeros(vec![cfg.n_ctx, h, d]);
            for (p, row) in out.data.chunks_exact_mut(h * d).enumerate() {
                let pos = &w_pos[p * m..(p + 1) * m];
                for (hi, o) in row.iter_mut().enumerate() {
                    let (head, i) = (hi / d, hi % d);
                    *o = pos
                        .iter()
                        .enumerate()
                        .map(|(c, &x)| x as f64 * w[(head * m + c) * d + i] as f64)
                        .sum::<f64>() as f32;
                }
            }
            sd.insert(TensorId::layer(table, l).to_string(), out);
        }
    }
    Ok(())
}
