//! `microlens eval-induction MODEL.mlb`: the held-out induction tests (repeated random tokens with
//! replacement, prefix + repeated segment with replacement, distinct tokens; English phrases for byte
//! models) through the core forward pass, with the naive "copy after the last occurrence" rule beside.

use std::path::PathBuf;

use anyhow::{Context, Result};
use microlens::Model;

use microlens_host::eval::run::check_sequences;
use microlens_host::train::heldout::score_all;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb).
    pub model: PathBuf,
    /// Sequences per test.
    #[arg(long, default_value_t = 512)]
    pub sequences: usize,
    /// Seed of the held-out sequences.
    #[arg(long, default_value_t = 4242)]
    pub seed: u64,
    /// Print one JSON array instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let bytes = microlens_host::io::files::read_blob(&args.model)?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    check_sequences("--sequences", args.sequences, model.config().n_ctx)?;
    let scores = score_all(&model, args.sequences, args.seed)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&scores)?);
        return Ok(());
    }
    println!(
        "{:>9} {:>8} {:>10}  held-out test (sequences x predictions in the repeat)",
        "accuracy", "loss", "last-occ."
    );
    for s in &scores {
        println!(
            "{:>8.2}% {:>8.4} {:>9.2}%  {} ({} x {})",
            100.0 * s.accuracy,
            s.loss,
            100.0 * s.last_occurrence,
            s.description,
            s.sequences,
            s.predictions / s.sequences.max(1)
        );
    }
    Ok(())
}
