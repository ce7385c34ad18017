//! `microlens circuits MODEL.mlb`: the framework paper's analyses of a blob: head detectors, copying and
//! composition scores, direct logit attribution, the ablation table, QK/OV skip-trigram and bigram tables,
//! as text, one JSON object (`--json`) and PNG heatmaps (`--plot DIR`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use microlens::Model;

use microlens_host::analysis::circuits::{analyse, CircuitOptions};
use microlens_host::io::output::Outputs;
use microlens_host::report::circuits::{print_text, to_json, write_plots, PLOTS};
use microlens_host::report::plot::check_dir;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb).
    pub model: PathBuf,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Write PNG heatmaps (composition, head scores, attention patterns) into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Number of repeated random sequences for the detectors, attribution and ablation.
    #[arg(long, default_value_t = 8)]
    pub sequences: usize,
    /// Length of each random half (the sequence is twice as long) [default: min(n_ctx / 2, 32)].
    #[arg(long)]
    pub half: Option<usize>,
    /// Seed of the random sequences and of the composition baseline.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Rows of the skip-trigram and bigram tables.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let outputs = Outputs::with_inputs([args.model.as_path()]);
    if let Some(dir) = &args.plot {
        check_dir(&outputs, dir, PLOTS)?;
    }
    let bytes = microlens_host::io::files::read_blob(&args.model)?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    // The host's column-blocked weights: the same bits, faster.
    let host = microlens::host::HostWeights::new(&model);
    let model = model.with_host(&host);
    let opts = CircuitOptions {
        sequences: args.sequences,
        half: args.half,
        seed: args.seed,
        top: args.top,
    };
    let report = analyse(&model, &opts)?;
    if args.json {
        println!("{}", to_json(&report));
    } else {
        print_text(&report);
    }
    if let Some(dir) = &args.plot {
        for f in write_plots(&model, &report, &outputs, dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}
