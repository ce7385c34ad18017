//! The training loop: AdamW on fresh random batches, linear warm-up then cosine decay of the learning rate.
//!
//! Every random number comes from ChaCha8 streams of the seed (stream 0: initial weights, stream 1:
//! training data), so the same seed and thread count give the same weights.
//!
//! A step's gradients come from [`super::shards`]: fixed shards of the batch, one per core.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::data::TrainData;
use super::model::{Model, ModelConfig};
use super::sequence::Sequence;
use super::shards::{sharded_gradients, OneThreadPerOp};
use super::Trainable;

/// Training hyper-parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrainConfig {
    /// Model shape.
    pub model: ModelConfig,
    /// Training data.
    pub data: TrainData,
    /// Optimiser steps.
    pub steps: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Sequences per step.
    pub batch: usize,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// Steps of linear warm-up.
    pub warmup: usize,
    /// Final learning rate as a fraction of the peak.
    pub final_lr_frac: f64,
    /// Seed of every random number.
    pub seed: u64,
}

impl TrainConfig {
    /// Learning rate at `step` ([`Schedule::lr_at`]).
    pub fn lr_at(&self, step: usize) -> f64 {
        self.schedule().lr_at(step)
    }

    /// Its optimiser settings.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            steps: self.steps,
            lr: self.lr,
            weight_decay: self.weight_decay,
            warmup: self.warmup,
            final_lr_frac: self.final_lr_frac,
        }
    }
}

/// The optimiser's settings: AdamW for `steps` steps, linear warm-up then cosine decay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    /// Optimiser steps.
    pub steps: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// Steps of linear warm-up.
    pub warmup: usize,
    /// Final learning rate as a fraction of the peak.
    pub final_lr_frac: f64,
}

impl Schedule {
    /// Learning rate at `step` (0-based): `lr * (step+1)/warmup` during warm-up, then cosine from `lr` to
    /// `final_lr_frac * lr`.
    pub fn lr_at(&self, step: usize) -> f64 {
        if step < self.warmup {
            return self.lr * (step + 1) as f64 / self.warmup as f64;
        }
        let span = self.steps.saturating_sub(self.warmup).max(1) as f64;
        let progress = ((step - self.warmup) as f64 / span).min(1.0);
        let cos = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        self.lr * (self.final_lr_frac + (1.0 - self.final_lr_frac) * cos)
    }
}

/// Figures of one training step, on its own batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepReport {
    /// 1-based step number.
    pub step: usize,
    /// Training loss (all positions).
    pub loss: f64,
    /// Loss on the repeated part.
    pub loss_repeated: f64,
    /// Top-1 accuracy on the repeated part.
    pub acc_repeated: f64,
}

/// A trained model and how long it took.
pub struct Trained {
    /// The model.
    pub model: Model,
    /// The last step's figures.
    pub last: StepReport,
    /// Wall time of the loop.
    pub elapsed: Duration,
}

/// RNG stream `stream` of `seed`.
pub fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// Trains a model from scratch, calling `on_step` after every step.
pub fn train(cfg: &TrainConfig, on_step: impl FnMut(&StepReport)) -> Result<Trained> {
    ensure!(
        cfg.steps > 0 && cfg.batch > 0,
        "steps and batch must be positive"
    );
    let (n_ctx, d_vocab) = (cfg.model.n_ctx, cfg.model.d_vocab);
    cfg.data.check(n_ctx, d_vocab)?;
    let model = Model::new(cfg.model, &mut rng(cfg.seed, 0))?;
    let mut data_rng = rng(cfg.seed, 1);
    let (last, elapsed) = optimise(
        &model,
        &cfg.schedule(),
        |_| {
            cfg.data
                .sample_many(&mut data_rng, n_ctx, d_vocab, cfg.batch)
        },
        on_step,
    )?;
    Ok(Trained {
        model,
        last,
        elapsed,
    })
}

/// The training loop on any [`Trainable`] model: the steps of `cfg`, each on the batch `batch(step)`
/// gives, calling `on_step` after each. Returns the last step's figures and the loop's
/// wall time.
pub fn optimise<M: Trainable>(
    model: &M,
    cfg: &Schedule,
    mut batch: impl FnMut(usize) -> Result<Vec<Sequence>>,
    mut on_step: impl FnMut(&StepReport),
) -> Result<(StepReport, Duration)> {
    ensure!(cfg.steps > 0, "steps must be positive");
    let params = ParamsAdamW {
        lr: cfg.lr_at(0),
        weight_decay: cfg.weight_decay,
        ..ParamsAdamW::default()
    };
    let mut opt = AdamW::new(model.vars(), params)?;
    let threads = candle_core::utils::get_num_threads();
    let _single = OneThreadPerOp::new();
    let start = Instant::now();
    let mut last = None;
    for step in 0..cfg.steps {
        let seqs = batch(step)?;
        opt.set_learning_rate(cfg.lr_at(step));
        let (grads, figures) = sharded_gradients(model, &seqs, threads)?;
        opt.step(&grads)?;
        let report = StepReport {
            step: step + 1,
            loss: figures[0],
            loss_repeated: figures[1],
            acc_repeated: figures[2],
        };
        on_step(&report);
        last = Some(report);
    }
    let last = last.expect("steps > 0");
    Ok((last, start.elapsed()))
}
