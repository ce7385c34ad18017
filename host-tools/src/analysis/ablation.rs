//! The framework paper's ablation table: mean next-token loss (nats) with the direct path only, with the
//! heads of the first layers, with all layers, and with each head ablated. The loss counts the
//! predictions made at positions `from_pos..` (e.g. the repeated half of a repeated random sequence, as
//! TransformerLens's `induction_loss`; 0 for all). Heads are removed by
//! zero-ablating `hook_z` (the core's [`HeadAblation`]), so `b_O` (which holds the folded `b_V` in
//! processed models) and any MLPs stay.

use anyhow::Result;
use microlens::analysis::{Head, HeadAblation};
use microlens::Model;

use crate::eval::run::{log_softmax, par_map, run_with_hooks};

/// Mean next-token cross-entropy (nats) of `logits` (`[pos][vocab]`) on `tokens`, over the predictions
/// made at positions `from_pos..len - 1` (0 if there are none).
pub fn mean_loss(logits: &[Vec<f32>], tokens: &[u32], from_pos: usize) -> f64 {
    let positions = from_pos..tokens.len().saturating_sub(1);
    if positions.is_empty() {
        return 0.0;
    }
    let n = positions.len() as f64;
    positions
        .map(|p| -log_softmax(&logits[p])[tokens[p + 1] as usize] as f64)
        .sum::<f64>()
        / n
}

/// Mean over `seqs` of the loss (from `from_pos`) with `heads` zero-ablated.
pub fn loss_with_ablation(
    model: &Model<'_>,
    seqs: &[Vec<u32>],
    from_pos: usize,
    heads: &[Head],
) -> Result<f64> {
    // Sequences in parallel, their losses summed in sequence order.
    let losses = par_map(seqs, |tokens| {
        let logits = run_with_hooks(model, tokens, &mut HeadAblation::zero(heads))?;
        Ok(mean_loss(&logits, tokens, from_pos))
    })?;
    let total = losses.into_iter().fold(0.0, |t, l| t + l);
    Ok(total / seqs.len().max(1) as f64)
}

/// Losses (nats) of the model with parts of it ablated.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AblationTable {
    /// The first position whose prediction counts.
    pub from_pos: usize,
    /// `by_layers[k]`: only the heads of layers `0..k` kept; `[0]` is the direct path only, the last
    /// entry the full model.
    pub by_layers: Vec<f64>,
    /// `[layer * n_heads + head]`: the full model with that one head ablated.
    pub per_head: Vec<f64>,
}

/// The ablation table of `model` on `seqs`, the loss counted from position `from_pos`.
pub fn ablation_table(
    model: &Model<'_>,
    seqs: &[Vec<u32>],
    from_pos: usize,
) -> Result<AblationTable> {
    let cfg = model.config();
    let heads_from = |layer: usize| -> Vec<Head> {
        (layer..cfg.n_layers)
            .flat_map(|l| (0..cfg.n_heads).map(move |h| Head::new(l, h)))
            .collect()
    };
    let by_layers = (0..=cfg.n_layers)
        .map(|k| loss_with_ablation(model, seqs, from_pos, &heads_from(k)))
        .collect::<Result<_>>()?;
    let per_head = (0..cfg.n_layers)
        .flat_map(|l| (0..cfg.n_heads).map(move |h| Head::new(l, h)))
        .map(|h| loss_with_ablation(model, seqs, from_pos, &[h]))
        .collect::<Result<_>>()?;
    Ok(AblationTable {
        from_pos,
        by_layers,
        per_head,
    })
}
