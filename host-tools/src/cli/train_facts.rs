//! `microlens train-facts`: train the tiny fact model (attention + MLP) on the CPU and write it as
//! TransformerLens safetensors + config JSON, its facts file and its `f32` blob.
//!
//! The defaults produce the shipped fact model (`firmware-example/model/facts-4l.*`): 4 layers, d_model
//! 64, 4 heads of 16, MLPs of 256, LayerNorm, vocab 64, context 4; 64 subjects x 4 relations = 256 facts.

use std::path::PathBuf;

use anyhow::{ensure, Result};

use microlens::{Normalization, Positional};
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::io::output::atomic_write;
use microlens_host::train::budget::TrainingShape;
use microlens_host::train::export::export;
use microlens_host::train::facts::{
    as_prompt_targets, recall, train_facts, write_facts_file, FactSpec, FactsTrainConfig,
};
use microlens_host::train::model::ModelConfig;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output directory (created if missing).
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
    /// Layers (attention + MLP each).
    #[arg(long, default_value_t = 4)]
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
    /// MLP width.
    #[arg(long, default_value_t = 256)]
    pub d_mlp: usize,
    /// Vocabulary: subject tokens are the first half, then the relations, then the objects.
    #[arg(long, default_value_t = 64)]
    pub vocab: usize,
    /// Context length (at least the 3-token prompt).
    #[arg(long, default_value_t = 4)]
    pub n_ctx: usize,
    /// Subjects (distinct pairs of subject tokens).
    #[arg(long, default_value_t = 64)]
    pub subjects: usize,
    /// Relations (one object per subject and relation).
    #[arg(long, default_value_t = 4)]
    pub relations: usize,
    /// Optimiser steps (every fact in every step).
    #[arg(long, default_value_t = 1500)]
    pub steps: usize,
    /// Learning rate (AdamW; a tenth of it for the last quarter).
    #[arg(long, default_value_t = 3e-3, allow_hyphen_values = true)]
    pub lr: f64,
    /// Seed of the weights and the facts.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// File stem of the outputs [default: `facts-{layers}l`].
    #[arg(long)]
    pub name: Option<String>,
}

/// Refuses sizes that cannot train, before anything is allocated: zero sizes, a context without room
/// for the 3-token prompt, a vocabulary without room for the subjects, relations and objects, and
/// sizes beyond the training budget (every fact is in every step's batch).
fn check_sizes(args: &Args, cfg: &FactsTrainConfig) -> Result<()> {
    for (flag, value) in [
        ("--layers", args.layers),
        ("--d-model", args.d_model),
        ("--heads", args.heads),
        ("--d-head", args.d_head),
        ("--d-mlp", args.d_mlp),
        ("--steps", args.steps),
    ] {
        ensure!(value > 0, "{flag} must be at least 1");
    }
    ensure!(
        args.n_ctx >= 3,
        "--n-ctx must hold the 3-token prompt, not {}",
        args.n_ctx
    );
    let batch = args.subjects.saturating_mul(args.relations);
    TrainingShape {
        model: &cfg.model,
        d_mlp: args.d_mlp,
        batch,
        eval_size: 0,
    }
    .check("--layers, --d-model, --heads, --d-head, --d-mlp, --vocab, --n-ctx, --subjects or --relations")?;
    ensure!(
        u32::try_from(args.vocab).is_ok(),
        "--vocab {} is beyond 32-bit token ids",
        args.vocab
    );
    cfg.spec
        .check()
        .map_err(|e| anyhow::anyhow!("--subjects, --relations and --vocab: {e}"))
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    super::training_args::check_lr_and_out(args.lr, &args.out)?;
    let cfg = FactsTrainConfig {
        model: ModelConfig {
            n_layers: args.layers,
            d_model: args.d_model,
            n_heads: args.heads,
            d_head: args.d_head,
            d_vocab: args.vocab,
            n_ctx: args.n_ctx,
            positional: Positional::Standard,
            norm: Normalization::LN,
            eps: 1e-5,
        },
        d_mlp: args.d_mlp,
        spec: FactSpec {
            n_subjects: args.subjects,
            n_relations: args.relations,
            d_vocab: args.vocab,
        },
        steps: args.steps,
        lr: args.lr,
        weight_decay: 0.01,
        seed: args.seed,
    };
    check_sizes(&args, &cfg)?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("facts-{}l", args.layers));
    let trained = train_facts(&cfg, |step, loss, acc| {
        if step % (cfg.steps / 10).max(1) == 0 {
            eprintln!(
                "step {step}/{}: loss {loss:.4}, facts recalled {:.1}%",
                cfg.steps,
                100.0 * acc
            );
        }
    })?;
    let out = export(&trained.model, &args.out, &name, cfg.seed)?;
    let facts_path = args.out.join(format!("{name}.facts"));
    write_facts_file(&facts_path, &cfg.spec, &trained.facts)?;
    let opts = ConvertOptions {
        config: Some(out.config.clone()),
        ..ConvertOptions::default()
    };
    let blob = convert(&out.weights, &opts)?.blob;
    let blob_path = args.out.join(format!("{name}.mlb"));
    atomic_write(&blob_path, &blob)?;
    let core_model = microlens::Model::from_bytes(&blob)?;
    let recalled = recall(&core_model, &as_prompt_targets(&trained.facts))?;
    let m = &cfg.model;
    println!(
        "model: {} layers, d_model {}, {} heads x {}, d_mlp {}, vocab {}, n_ctx {}, {} params",
        m.n_layers,
        m.d_model,
        m.n_heads,
        m.d_head,
        cfg.d_mlp,
        m.d_vocab,
        m.n_ctx,
        trained.model.n_params()
    );
    println!(
        "facts: {} subjects x {} relations = {}; trained {} steps in {:.1} s, seed {}, last loss {:.4}",
        cfg.spec.n_subjects,
        cfg.spec.n_relations,
        trained.facts.len(),
        cfg.steps,
        trained.elapsed.as_secs_f64(),
        cfg.seed,
        trained.loss
    );
    println!(
        "facts recalled (top-1 after the prompt, core forward, f32 blob): {:.2}% ({} of {})",
        100.0 * recalled,
        (recalled * trained.facts.len() as f64).round(),
        trained.facts.len()
    );
    for path in [&out.weights, &out.config, &facts_path, &blob_path] {
        println!("wrote {}", path.display());
    }
    Ok(())
}
