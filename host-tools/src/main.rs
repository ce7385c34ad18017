//! `microlens`: convert checkpoints to blobs, inspect and run them, train the tiny induction model.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// Tensor buffers are allocated and freed many times per training step: mimalloc reuses them where glibc
/// malloc unmaps and page-faults them back (a third of a step).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "microlens",
    version,
    about = "TransformerLens-style interpretability for tiny transformers on microcontrollers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Convert a checkpoint (TransformerLens or HF GPT-2 safetensors, or a TransformerLens .pth) to a blob.
    Convert(cli::convert::Args),
    /// Show a blob's config, tensors, sizes and the RAM it needs.
    Inspect(cli::inspect::Args),
    /// Compare a (quantised) candidate blob with a reference: next-token KL, top-1 agreement, and per head
    /// attention, induction, previous-token, copying and composition scores.
    Fidelity(cli::fidelity::Args),
    /// Run tokens through a blob and show the top next tokens (or JSON logits and patterns).
    Run(cli::run::Args),
    /// Train the tiny attention-only induction model on the CPU with candle.
    TrainInduction(cli::train_induction::Args),
    /// Circuit analysis: head detectors, copying and composition scores, attribution, the ablation table,
    /// skip-trigram and bigram tables.
    Circuits(cli::circuits::Args),
    /// Held-out induction tests through the core forward: repeated random tokens with replacement, random
    /// prefix + repeated segment, distinct tokens (and English phrases for byte models).
    EvalInduction(cli::eval_induction::Args),
    /// Greedy continuation of a prompt (token ids, or text for byte-level models) through the KV cache.
    Generate(cli::generate::Args),
    /// Activation patching from a clean into a corrupted sequence, measured by a logit difference.
    Patch(cli::patch::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Convert(a) => cli::convert::run(a),
        Command::Inspect(a) => cli::inspect::run(a),
        Command::Fidelity(a) => cli::fidelity::run(a),
        Command::Run(a) => cli::run::run(a),
        Command::TrainInduction(a) => cli::train_induction::run(a),
        Command::Circuits(a) => cli::circuits::run(a),
        Command::EvalInduction(a) => cli::eval_induction::run(a),
        Command::Generate(a) => cli::generate::run(a),
        Command::Patch(a) => cli::patch::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
