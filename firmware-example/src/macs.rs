//! Multiply-accumulates of the forward pass, counted from the config: the figure the cost per token is
//! divided by to give the cost per MAC.

use microlens::Config;

/// Multiply-accumulates of `len` steps from position 0: per step and layer the Q, K, V and output
/// projections (`4 d_model d_attn`), the MLP (`2 d_model d_mlp`) and, at position `p`, the scores and the
/// mix over `p + 1` positions (`2 (p + 1) d_attn`); per step the unembedding (`d_model d_vocab_out`).
pub fn per_prompt(cfg: &Config, len: usize) -> u64 {
    let (d_model, d_attn) = (cfg.d_model as u64, cfg.d_attn() as u64);
    let per_layer = 4 * d_model * d_attn + 2 * d_model * cfg.d_mlp_or_zero() as u64;
    let per_step = cfg.n_layers as u64 * per_layer + d_model * cfg.d_vocab_out as u64;
    let len = len as u64;
    // sum over p < len of (p + 1) = len (len + 1) / 2, for every layer.
    let attention = cfg.n_layers as u64 * 2 * d_attn * (len * (len + 1) / 2);
    len * per_step + attention
}
