//! `microlens`: convert checkpoints to blobs, inspect and run them, train the tiny induction model.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

/// Tensor buffers are allocated and freed many times per training step: mimalloc reuses them where glibc
/// malloc unmaps and page-faults them back (a third of a step).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

extern "C" {
    /// mimalloc's `mi_option_set(option, value)` (the library the `mimalloc` crate links).
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (the same in its v2 and v3).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// Freed memory stays with the process: by default mimalloc gives it back to the kernel 10 ms after a
/// free, and a training step then spends a tenth of its time having fresh pages zeroed.
fn keep_freed_memory() {
    // SAFETY: `mi_option_set` stores an integer in mimalloc's option table (-1: never purge); called first
    // in `main`, before any other thread exists.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

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
    /// Drive a board in serve mode over its serial link: what it runs, its logits and hash, and its own
    /// activations under TransformerLens names.
    Device(cli::device::Args),
    /// Train the tiny attention-only induction model on the CPU with candle.
    TrainInduction(cli::train_induction::Args),
    /// Train a LLaMA-family story model (llama2.c's stories260K shape: RMSNorm, rotary, grouped-query
    /// attention, SwiGLU) on generated English stories, with its own BPE tokenizer.
    TrainLlama(cli::train_llama::Args),
    /// Train the tiny fact model (subject tokens + relation token -> object, attention + MLP) for causal
    /// tracing and memory editing.
    TrainFacts(cli::train_facts::Args),
    /// Causal tracing (ROME): corrupt the subject's embeddings, restore each layer's residual stream, MLP
    /// and attention output at each position, report the clean answer's probability restored.
    Trace(cli::trace::Args),
    /// Memory editing: write `prompt -> target` into an MLP's W_out (ROME; MEMIT with --facts), report
    /// efficacy, unrelated KL and the edit's survival at f16/i8/i4.
    Edit(cli::edit::Args),
    /// Circuit analysis: head detectors, copying and composition scores, attribution, the ablation table,
    /// skip-trigram and bigram tables.
    Circuits(cli::circuits::Args),
    /// Held-out induction tests through the core forward: repeated random tokens with replacement, random
    /// prefix + repeated segment, distinct tokens (and English phrases for byte models).
    EvalInduction(cli::eval_induction::Args),
    /// Greedy continuation of a prompt (token ids or text) through the KV cache.
    Generate(cli::generate::Args),
    /// Activation patching from a clean into a corrupted sequence, measured by a logit difference.
    Patch(cli::patch::Args),
    /// One self-contained HTML page: the model card, every head's attention pattern (a candidate's beside
    /// the reference's, with their difference), the head and composition tables, the fidelity summary.
    Report(cli::report::Args),
}

/// A closed stdout (`microlens run ... | head -c1`) ends the process quietly, as it does `cat`, instead of
/// making `println!` panic.
fn quiet_broken_pipe() {
    #[cfg(unix)]
    // SAFETY: called first in `main`, before any other thread exists; restoring the default action of a
    // signal has no other effect on the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    quiet_broken_pipe();
    keep_freed_memory();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            e.exit()
        }
        Err(e) => {
            // Usage errors: clap's first line (and the values it accepts), without the usage block.
            let rendered = e.to_string();
            let mut lines = rendered.lines().filter(|l| {
                let l = l.trim();
                !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
            });
            let first = lines.next().unwrap_or("error: bad arguments").trim();
            let rest: Vec<&str> = lines.map(str::trim).collect();
            eprintln!(
                "{}",
                microlens_host::excerpt::one_line(&format!("{first} {}", rest.join(" ")))
            );
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Convert(a) => cli::convert::run(a),
        Command::Inspect(a) => cli::inspect::run(a),
        Command::Fidelity(a) => cli::fidelity::run(a),
        Command::Run(a) => cli::run::run(a),
        Command::Device(a) => cli::device::run(a),
        Command::TrainInduction(a) => cli::train_induction::run(a),
        Command::TrainLlama(a) => cli::train_llama::run(a),
        Command::TrainFacts(a) => cli::train_facts::run(a),
        Command::Trace(a) => cli::trace::run(a),
        Command::Edit(a) => cli::edit::run(a),
        Command::Circuits(a) => cli::circuits::run(a),
        Command::EvalInduction(a) => cli::eval_induction::run(a),
        Command::Generate(a) => cli::generate::run(a),
        Command::Patch(a) => cli::patch::run(a),
        Command::Report(a) => cli::report::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "error: {}",
                microlens_host::excerpt::one_line(&format!("{e:#}"))
            );
            ExitCode::FAILURE
        }
    }
}
