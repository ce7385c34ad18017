//! Next-token cross-entropy on a batch, over all positions and over the repeated (predictable) part.
//!
//! Training minimises the loss on **all** positions: the model is then a proper next-token model of its
//! data (close to uniform where nothing is predictable, confident inside the repeats), so TransformerLens's
//! per-position loss and logit attribution mean what they usually mean; a loss on the repeats only would
//! leave the prefix predictions unconstrained. The repeated part is what is reported.

use anyhow::Result;
use candle_core::{DType, Device, Tensor, D};

use super::sequence::Sequence;

/// A batch as tensors: inputs, next-token targets and the repeated-part mask.
pub struct Batch {
    /// Tokens `u32 [batch, n_ctx]`.
    pub tokens: Tensor,
    /// Targets `u32 [batch * (n_ctx - 1)]`: `tokens[b, i + 1]` for prediction position `i`.
    pub targets: Tensor,
    /// `1.0` where the prediction lies in the repeated part, else `0.0`, `f32 [batch * (n_ctx - 1)]`.
    pub repeated: Tensor,
    /// Number of ones in `repeated`.
    pub n_repeated: usize,
}

impl Batch {
    /// Builds the tensors for equal-length sequences.
    pub fn new(seqs: &[Sequence]) -> Result<Self> {
        let t = seqs.first().map_or(0, |s| s.tokens.len());
        anyhow::ensure!(
            t >= 2 && seqs.iter().all(|s| s.tokens.len() == t),
            "need equal-length sequences of >= 2 tokens"
        );
        let flat: Vec<u32> = seqs.iter().flat_map(|s| s.tokens.iter().copied()).collect();
        let targets: Vec<u32> = seqs
            .iter()
            .flat_map(|s| s.tokens[1..].iter().copied())
            .collect();
        let repeated: Vec<f32> = seqs
            .iter()
            .flat_map(|s| (0..t - 1).map(move |i| if s.is_predictable(i) { 1.0 } else { 0.0 }))
            .collect();
        let n_repeated = repeated.iter().filter(|&&m| m > 0.0).count();
        let n = targets.len();
        Ok(Self {
            tokens: Tensor::from_vec(flat, (seqs.len(), t), &Device::Cpu)?,
            targets: Tensor::from_vec(targets, n, &Device::Cpu)?,
            repeated: Tensor::from_vec(repeated, n, &Device::Cpu)?,
            n_repeated,
        })
    }
}

/// Losses of one forward pass.
pub struct Losses {
    /// Mean cross-entropy over all predictions (scalar tensor, differentiable): the training objective.
    pub all: Tensor,
    /// Mean cross-entropy over the repeated part (scalar tensor).
    pub repeated: Tensor,
    /// Per-prediction cross-entropy `[batch * (n_ctx - 1)]`.
    pub per_token: Tensor,
}

/// Cross-entropy of `logits [batch, n_ctx, d_vocab]` against the batch's next tokens: `-log softmax(logits)[target]`.
pub fn losses(logits: &Tensor, batch: &Batch) -> Result<Losses> {
    let (b, t, v) = logits.dims3()?;
    let logits = logits.narrow(1, 0, t - 1)?.reshape((b * (t - 1), v))?;
    let logp = candle_nn::ops::log_softmax(&logits, D::Minus1)?;
    let per_token = logp
        .gather(&batch.targets.unsqueeze(1)?, 1)?
        .squeeze(1)?
        .neg()?;
    let all = per_token.mean_all()?;
    let repeated = ((&per_token * &batch.repeated)?.sum_all()? / batch.n_repeated.max(1) as f64)?;
    Ok(Losses {
        all,
        repeated,
        per_token,
    })
}

/// Top-1 accuracy on the repeated part: the share of repeated predictions whose argmax is the next token.
pub fn repeated_accuracy(logits: &Tensor, batch: &Batch) -> Result<f64> {
    let (b, t, _) = logits.dims3()?;
    let pred = logits
        .narrow(1, 0, t - 1)?
        .argmax(D::Minus1)?
        .reshape(b * (t - 1))?;
    let correct = pred.eq(&batch.targets)?.to_dtype(DType::F32)?;
    let hits = (correct * &batch.repeated)?.sum_all()?.to_scalar::<f32>()?;
    Ok(f64::from(hits) / batch.n_repeated.max(1) as f64)
}
