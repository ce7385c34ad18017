//! Data-parallel gradients: a batch split into [`SHARDS`] fixed shards, each run forward and backward on
//! its own thread, their gradients added in shard order.
//!
//! The per-head attention products (`[n_ctx, d_head] x [d_head, n_ctx]` per sequence) are below gemm's
//! threading threshold, and candle's threaded kernels spin between small ops (on a loaded 2-core machine
//! a 2-thread step took 10x the CPU of a 1-thread one), so each op runs on one thread and the
//! cores share the batch instead. The shards do not depend on the thread count: 1 and 2 threads give the
//! same bytes.

use anyhow::{anyhow, Result};
use candle_core::backprop::GradStore;

use super::loss::{losses, repeated_accuracy, Batch};
use super::sequence::Sequence;
use super::Trainable;

/// Shards per batch (one per core of the 2-core machine the recipe is timed on).
pub const SHARDS: usize = 2;

/// candle chooses gemm's threading from `RAYON_NUM_THREADS` at every matmul: while this guard lives it
/// is `1` (its previous value is restored on drop).
pub struct OneThreadPerOp(Option<std::ffi::OsString>);

const THREADS_VAR: &str = "RAYON_NUM_THREADS";

impl OneThreadPerOp {
    /// Sets `RAYON_NUM_THREADS=1` (training sets it before it starts its shard threads).
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        let previous = std::env::var_os(THREADS_VAR);
        std::env::set_var(THREADS_VAR, "1");
        OneThreadPerOp(previous)
    }
}

impl Drop for OneThreadPerOp {
    fn drop(&mut self) {
        match self.0.take() {
            Some(v) => std::env::set_var(THREADS_VAR, v),
            None => std::env::remove_var(THREADS_VAR),
        }
    }
}

/// One shard's gradients (of its loss weighted by `weight`, its share of the batch), its weighted loss,
/// its repeated-part loss and hits (summed, not averaged) and its number of repeated predictions.
type ShardResult = (GradStore, [f64; 3], usize);

fn shard_gradients<M: Trainable>(model: &M, part: &[Sequence], weight: f64) -> Result<ShardResult> {
    let batch = Batch::new(part)?;
    let logits = model.logits(&batch.tokens)?;
    let l = losses(&logits, &batch)?;
    let grads = (&l.all * weight)?.backward()?;
    let n = batch.n_repeated as f64;
    let figures = [
        weight * f64::from(l.all.to_scalar::<f32>()?),
        n * f64::from(l.repeated.to_scalar::<f32>()?),
        n * repeated_accuracy(&logits, &batch)?,
    ];
    Ok((grads, figures, batch.n_repeated))
}

/// Gradients of the mean loss over all predictions of `seqs`, and its figures `[loss, repeated loss,
/// repeated accuracy]`, from [`SHARDS`] contiguous shards run on up to `threads` threads.
pub fn sharded_gradients<M: Trainable>(
    model: &M,
    seqs: &[Sequence],
    threads: usize,
) -> Result<(GradStore, [f64; 3])> {
    let shard = seqs.len().div_ceil(SHARDS).max(1);
    let total = seqs.len() as f64;
    let parts: Vec<&[Sequence]> = seqs.chunks(shard).collect();
    let results: Vec<Result<ShardResult>> = if threads <= 1 || parts.len() == 1 {
        parts
            .iter()
            .map(|p| shard_gradients(model, p, p.len() as f64 / total))
            .collect()
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .iter()
                .map(|p| s.spawn(move || shard_gradients(model, p, p.len() as f64 / total)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| anyhow!("a training shard panicked"))?)
                .collect()
        })
    };
    let mut results = results.into_iter();
    let first = results.next().ok_or_else(|| anyhow!("an empty batch"))?;
    let (mut grads, mut figures, mut n_repeated) = first?;
    for result in results {
        let (g, f, n) = result?;
        for var in model.vars() {
            if let Some(add) = g.get(var.as_tensor()) {
                let sum = match grads.get(var.as_tensor()) {
                    Some(sum) => (sum + add)?,
                    None => add.clone(),
                };
                grads.insert(var.as_tensor(), sum);
            }
        }
        (0..3).for_each(|k| figures[k] += f[k]);
        n_repeated += n;
    }
    let n = n_repeated.max(1) as f64;
    Ok((grads, [figures[0], figures[1] / n, figures[2] / n]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::data::TrainData;
    use crate::train::model::{Model, ModelConfig};
    use crate::train::trainer::rng;
    use microlens::{Normalization, Positional};

    /// The same bits on 1 and 2 threads, and the gradient of the whole batch's mean loss (up to the order
    /// of float sums).
    #[test]
    fn shards_give_the_batch_gradient_whatever_the_threads() -> Result<()> {
        let cfg = ModelConfig {
            n_layers: 2,
            d_model: 16,
            n_heads: 2,
            d_head: 8,
            d_vocab: 16,
            n_ctx: 16,
            positional: Positional::Standard,
            norm: Normalization::LN,
            eps: 1e-5,
        };
        let model = Model::new(cfg, &mut rng(1, 0))?;
        let seqs = TrainData::Replacement.sample_many(&mut rng(1, 1), 16, 16, 7)?;
        let (one, f1) = sharded_gradients(&model, &seqs, 1)?;
        let (two, f2) = sharded_gradients(&model, &seqs, 2)?;
        let batch = Batch::new(&seqs)?;
        let whole = losses(&model.forward(&batch.tokens)?.logits, &batch)?;
        let reference = whole.all.backward()?;
        assert_eq!(f1, f2);
        assert!((f1[0] - f64::from(whole.all.to_scalar::<f32>()?)).abs() < 1e-5);
        for var in model.vars() {
            let g = |s: &GradStore| {
                s.get(var.as_tensor())
                    .unwrap()
                    .flatten_all()?
                    .to_vec1::<f32>()
            };
            assert_eq!(g(&one)?, g(&two)?);
            for (a, b) in g(&one)?.iter().zip(g(&reference)?) {
                assert!((a - b).abs() < 1e-5, "{a} vs {b}");
            }
        }
        Ok(())
    }
}
