//! Held-out evaluation: loss and accuracy on the repeated part, a fixed-distance copier baseline, and
//! per-head previous-token and induction scores from the attention patterns.

use anyhow::Result;

use super::loss::{losses, repeated_accuracy, Batch};
use super::model::Model;
use super::sequence::Sequence;

/// Sequences per forward pass during evaluation.
const EVAL_CHUNK: usize = 256;

/// Model quality on a set of sequences.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Metrics {
    /// Mean cross-entropy over all predictions.
    pub loss_all: f64,
    /// Mean cross-entropy over the repeated part.
    pub loss_repeated: f64,
    /// Top-1 accuracy over the repeated part.
    pub acc_repeated: f64,
}

/// Evaluates `model` on `seqs` (any number, processed in chunks).
pub fn evaluate(model: &Model, seqs: &[Sequence]) -> Result<Metrics> {
    let (mut sum_all, mut n_all, mut sum_rep, mut hits, mut n_rep) =
        (0.0, 0usize, 0.0, 0.0, 0usize);
    for chunk in seqs.chunks(EVAL_CHUNK) {
        let batch = Batch::new(chunk)?;
        let logits = model.forward(&batch.tokens)?.logits;
        let l = losses(&logits, &batch)?;
        let n = l.per_token.elem_count();
        sum_all += f64::from(l.all.to_scalar::<f32>()?) * n as f64;
        n_all += n;
        sum_rep += f64::from(l.repeated.to_scalar::<f32>()?) * batch.n_repeated as f64;
        hits += repeated_accuracy(&logits, &batch)? * batch.n_repeated as f64;
        n_rep += batch.n_repeated;
    }
    let n_rep = n_rep.max(1) as f64;
    Ok(Metrics {
        loss_all: sum_all / n_all.max(1) as f64,
        loss_repeated: sum_rep / n_rep,
        acc_repeated: hits / n_rep,
    })
}

/// Accuracy on the repeated part of the copier that always predicts `tokens[i + 1] = tokens[i + 1 - distance]`.
pub fn copier_accuracy(seqs: &[Sequence], distance: usize) -> f64 {
    let (mut hits, mut n) = (0usize, 0usize);
    for s in seqs {
        for i in (0..s.tokens.len()).filter(|&i| s.is_predictable(i)) {
            n += 1;
            hits += usize::from(i + 1 >= distance && s.tokens[i + 1 - distance] == s.tokens[i + 1]);
        }
    }
    hits as f64 / n.max(1) as f64
}

/// The best fixed-distance copier over distances `1..=max_distance`: `(distance, accuracy)`.
pub fn best_copier(seqs: &[Sequence], max_distance: usize) -> (usize, f64) {
    (1..=max_distance.max(1))
        .map(|d| (d, copier_accuracy(seqs, d)))
        .fold(
            (1, f64::NEG_INFINITY),
            |best, c| if c.1 > best.1 { c } else { best },
        )
}

/// Attention scores of one head.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadScore {
    /// Layer index.
    pub layer: usize,
    /// Head index.
    pub head: usize,
    /// Mean attention from position `i` to `i - 1`, over `i >= 1`.
    pub prev_token: f64,
    /// Mean attention from a repeated position `i` to `i - L + 1`, the token after the previous occurrence
    /// of token `i`, over the repeated part.
    pub induction: f64,
}

/// Previous-token and induction scores of every head on `seqs`.
pub fn head_scores(model: &Model, seqs: &[Sequence]) -> Result<Vec<HeadScore>> {
    let (n_layers, n_heads) = (model.cfg.n_layers, model.cfg.n_heads);
    let mut prev = vec![0.0f64; n_layers * n_heads];
    let mut ind = vec![0.0f64; n_layers * n_heads];
    let (mut n_prev, mut n_ind) = (0usize, 0usize);
    for chunk in seqs.chunks(EVAL_CHUNK) {
        let batch = Batch::new(chunk)?;
        let patterns = model.forward(&batch.tokens)?.patterns;
        let t = chunk[0].tokens.len();
        for (l, pattern) in patterns.iter().enumerate() {
            let p: Vec<f32> = pattern.flatten_all()?.to_vec1()?; // [b, h, i, j]
            for (b, s) in chunk.iter().enumerate() {
                for h in 0..n_heads {
                    let row = |i: usize| &p[((b * n_heads + h) * t + i) * t..][..t];
                    let k = l * n_heads + h;
                    prev[k] += (1..t).map(|i| f64::from(row(i)[i - 1])).sum::<f64>();
                    ind[k] += (s.first_predictable()..t)
                        .map(|i| f64::from(row(i)[i + 1 - s.segment_len]))
                        .sum::<f64>();
                }
            }
        }
        n_prev += chunk.len() * (t - 1);
        n_ind += chunk
            .iter()
            .map(|s| t - s.first_predictable())
            .sum::<usize>();
    }
    let mut out = Vec::with_capacity(n_layers * n_heads);
    for layer in 0..n_layers {
        for head in 0..n_heads {
            let k = layer * n_heads + head;
            out.push(HeadScore {
                layer,
                head,
                prev_token: prev[k] / n_prev.max(1) as f64,
                induction: ind[k] / n_ind.max(1) as f64,
            });
        }
    }
    Ok(out)
}
