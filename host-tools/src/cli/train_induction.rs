//! `microlens train-induction`: train the tiny attention-only induction model on the CPU and write it as
//! TransformerLens safetensors + config JSON.
//!
//! The defaults produce the shipped firmware model: 2 layers, d_model 64, 4 heads of 16, vocab 64, context
//! 64 (int8: ~45 KB of weights, 16 KB of KV cache).

use std::path::{Path, PathBuf};

use anyhow::{ensure, Result};
use indicatif::{ProgressBar, ProgressStyle};

use microlens::{Normalization, Positional};
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::import::tl_config::positional_name;
use microlens_host::train::budget::TrainingShape;
use microlens_host::train::data::{repeated_twice, Draw, InductionData, TrainData};
use microlens_host::train::eval::{best_copier, evaluate, head_scores, HeadScore};
use microlens_host::train::export::export;
use microlens_host::train::heldout::score_all;
use microlens_host::train::model::{Model, ModelConfig};
use microlens_host::train::trainer::{rng, train, TrainConfig, Trained};

/// `--positional`: where the positional embedding enters (`cfg.positional_embedding_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PositionalArg {
    /// `resid = W_E[tok] + W_pos[pos]`.
    Standard,
    /// `resid = W_E[tok]`; `W_pos[pos]` is added to the query and key inputs of every layer only.
    Shortformer,
    /// `resid = W_E[tok] + PE(pos)`, fixed sinusoids computed on the fly (no `W_pos` trained or stored;
    /// an extension of TransformerLens's config, `"sinusoidal"`).
    Sinusoidal,
}

impl From<PositionalArg> for Positional {
    fn from(arg: PositionalArg) -> Positional {
        match arg {
            PositionalArg::Standard => Positional::Standard,
            PositionalArg::Shortformer => Positional::Shortformer,
            PositionalArg::Sinusoidal => Positional::Sinusoidal,
        }
    }
}

/// `--norm`: normalisation before each attention layer and the unembedding (`cfg.normalization_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Norm {
    /// None (`null`): cheapest on the device.
    None,
    /// TransformerLens LayerNorm `"LN"`: `(x - mean) / sqrt(mean((x - mean)^2) + eps) * w + b`.
    Ln,
}

impl From<Norm> for Normalization {
    fn from(arg: Norm) -> Normalization {
        match arg {
            Norm::None => Normalization::None,
            Norm::Ln => Normalization::LN,
        }
    }
}

/// Seed of the held-out evaluation set, the same whatever the training seed.
const EVAL_SEED: u64 = 0xE7A1;

/// Seed and size of the held-out induction tests (`microlens eval-induction`'s defaults).
const HELD_OUT_SEED: u64 = 4242;
const HELD_OUT_SEQS: usize = 512;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output directory (created if missing).
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
    /// Attention layers.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Residual width.
    #[arg(long, default_value_t = 64)]
    pub d_model: usize,
    /// Heads per layer.
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    /// Width of one head.
    #[arg(long, default_value_t = 16)]
    pub d_head: usize,
    /// Vocabulary size.
    #[arg(long, default_value_t = 64)]
    pub vocab: usize,
    /// Context length.
    #[arg(long, default_value_t = 64)]
    pub n_ctx: usize,
    /// Optimiser steps.
    #[arg(long, default_value_t = 2000)]
    pub steps: usize,
    /// Peak learning rate (AdamW; linear warm-up, cosine decay to a tenth).
    #[arg(long, default_value_t = 5e-3, allow_hyphen_values = true)]
    pub lr: f64,
    /// Sequences per step.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Seed of the initial weights and the training data.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Positional embedding type.
    #[arg(long, value_enum, default_value_t = PositionalArg::Standard)]
    pub positional: PositionalArg,
    /// Normalisation: none (cheapest on the device) or TransformerLens LayerNorm.
    #[arg(long, value_enum, default_value_t = Norm::Ln)]
    pub norm: Norm,
    /// Training data: distinct segments, segments drawn with replacement, or bytes (random bytes and
    /// English text; needs `--vocab 256`).
    #[arg(long, value_enum, default_value_t = TrainData::Replacement)]
    pub data: TrainData,
    /// Held-out evaluation sequences.
    #[arg(long, default_value_t = 2048)]
    pub eval_size: usize,
    /// File stem of the outputs [default: `induction-{layers}l`, `{layers}` the value of `--layers`].
    #[arg(long)]
    pub name: Option<String>,
}

impl Args {
    /// The training configuration these arguments describe.
    pub fn train_config(&self) -> TrainConfig {
        TrainConfig {
            data: self.data,
            model: ModelConfig {
                n_layers: self.layers,
                d_model: self.d_model,
                n_heads: self.heads,
                d_head: self.d_head,
                d_vocab: self.vocab,
                n_ctx: self.n_ctx,
                positional: self.positional.into(),
                norm: self.norm.into(),
                eps: 1e-5,
            },
            steps: self.steps,
            lr: self.lr,
            batch: self.batch,
            weight_decay: 0.01,
            warmup: (self.steps / 20).clamp(1, 100),
            final_lr_frac: 0.1,
            seed: self.seed,
        }
    }
}

/// Refuses arguments that cannot train: a bad learning rate, an output path that is a file, sizes
/// beyond the training budget ([`TrainingShape::check`]).
fn check(args: &Args) -> Result<()> {
    super::training_args::check_lr_and_out(args.lr, &args.out)?;
    ensure!(args.eval_size > 0, "--eval-size must be positive");
    let cfg = args.train_config();
    TrainingShape {
        model: &cfg.model,
        d_mlp: 0,
        batch: args.batch,
        eval_size: args.eval_size,
    }
    .check("--batch, --n-ctx, --d-model, --heads, --layers or --eval-size")?;
    Ok(())
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    check(&args)?;
    let cfg = args.train_config();
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("induction-{}l", args.layers));
    let trained = train_with_progress(&cfg)?;
    print_training(&cfg, &trained, args.norm);
    print_candle_evaluation(&cfg, &trained.model, args.eval_size)?;
    let out = export(&trained.model, &args.out, &name, cfg.seed)?;
    print_held_out_tests(&out.weights, &out.config)?;
    println!("wrote {}", out.weights.display());
    println!("wrote {}", out.config.display());
    Ok(())
}

/// The shape, the time and the last training batch's figures.
fn print_training(cfg: &TrainConfig, trained: &Trained, norm: Norm) {
    let m = &cfg.model;
    println!(
        "model: {} layers, d_model {}, {} heads x {}, vocab {}, n_ctx {}, {} params, positional {}, norm {:?}",
        m.n_layers,
        m.d_model,
        m.n_heads,
        m.d_head,
        m.d_vocab,
        m.n_ctx,
        trained.model.n_params(),
        positional_name(m.positional),
        norm
    );
    let secs = trained.elapsed.as_secs_f64();
    println!(
        "trained {} steps in {secs:.1} s ({} threads, {:.1} ms/step), seed {}",
        cfg.steps,
        candle_core::utils::get_num_threads(),
        1e3 * secs / cfg.steps as f64,
        cfg.seed
    );
    let last = &trained.last;
    println!(
        "last batch: loss {:.4}, repeated part loss {:.4}, accuracy {:.1}%",
        last.loss,
        last.loss_repeated,
        100.0 * last.acc_repeated
    );
}

/// Loss and accuracy on `eval_size` held-out sequences of the training distribution, the best
/// fixed-distance copier beside, and every head's previous-token and induction scores (through candle).
fn print_candle_evaluation(cfg: &TrainConfig, model: &Model, eval_size: usize) -> Result<()> {
    let (n_ctx, d_vocab) = (cfg.model.n_ctx, cfg.model.d_vocab);
    let data = match cfg.data {
        TrainData::Distinct => InductionData::new(n_ctx, d_vocab)?,
        _ => InductionData::with_draw(n_ctx, d_vocab, Draw::Replacement)?,
    };
    let eval_set = data.sample_many(&mut rng(EVAL_SEED, 0), eval_size);
    let metrics = evaluate(model, &eval_set)?;
    let (copy_d, copy_acc) = best_copier(&eval_set, n_ctx / 2);
    let mut rr_rng = rng(EVAL_SEED, 1);
    let rr_set: Vec<_> = (0..256)
        .map(|_| repeated_twice(&mut rr_rng, n_ctx / 2, d_vocab, Draw::Distinct))
        .collect();
    println!(
        "held-out ({} sequences, varying offsets and segment lengths): loss {:.4} (all positions), \
         repeated part loss {:.4}, accuracy {:.2}%",
        eval_set.len(),
        metrics.loss_all,
        metrics.loss_repeated,
        100.0 * metrics.acc_repeated
    );
    println!(
        "baseline: best fixed-distance copier (distance {copy_d}) accuracy {:.2}% on the same data",
        100.0 * copy_acc
    );
    println!("head scores (prev-token / induction; held-out set | repeated random tokens):");
    let scores = head_scores(model, &eval_set)?;
    for (s, r) in scores.iter().zip(&head_scores(model, &rr_set)?) {
        println!(
            "  L{}H{}: {} | {}",
            s.layer,
            s.head,
            fmt_score(s),
            fmt_score(r)
        );
    }
    Ok(())
}

/// The held-out induction tests through the core forward on the converted f32 blob, as
/// `microlens eval-induction` runs them.
fn print_held_out_tests(weights: &Path, config: &Path) -> Result<()> {
    let opts = ConvertOptions {
        config: Some(config.to_path_buf()),
        ..ConvertOptions::default()
    };
    let blob = convert(weights, &opts)?.blob;
    let core_model = microlens::Model::from_bytes(&blob)?;
    println!(
        "held-out induction tests (core forward, f32 blob, {HELD_OUT_SEQS} sequences each; accuracy | last-occurrence rule):"
    );
    for s in score_all(&core_model, HELD_OUT_SEQS, HELD_OUT_SEED)? {
        println!(
            "  {}: {:.2}% | {:.2}%",
            s.description,
            100.0 * s.accuracy,
            100.0 * s.last_occurrence
        );
    }
    Ok(())
}

/// Trains with a progress bar showing smoothed loss and repeated-part accuracy (log lines when the bar
/// is hidden, e.g. without a terminal).
fn train_with_progress(cfg: &TrainConfig) -> Result<Trained> {
    let bar = ProgressBar::new(cfg.steps as u64);
    bar.set_style(ProgressStyle::with_template(
        "{bar:30} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}",
    )?);
    let mut smooth: Option<[f64; 3]> = None;
    let trained = train(cfg, |r| {
        // Exponential moving average over ~20 steps: a trend rather than batch noise.
        let now = [r.loss, r.loss_repeated, r.acc_repeated];
        let s = smooth.map_or(now, |s| {
            std::array::from_fn(|k| s[k] + (now[k] - s[k]) / 20.0)
        });
        smooth = Some(s);
        let msg = format!(
            "loss {:.3} | repeated: loss {:.3} acc {:.1}%",
            s[0],
            s[1],
            100.0 * s[2]
        );
        if bar.is_hidden() && r.step % (cfg.steps / 20).max(1) == 0 {
            eprintln!("step {}/{}: {msg}", r.step, cfg.steps);
        }
        bar.set_message(msg);
        bar.inc(1);
    })?;
    bar.finish();
    Ok(trained)
}

fn fmt_score(s: &HeadScore) -> String {
    format!("{:.3} / {:.3}", s.prev_token, s.induction)
}
