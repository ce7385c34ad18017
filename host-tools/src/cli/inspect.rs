//! `microlens inspect`: what a blob holds and what it costs in flash and RAM.

use std::path::PathBuf;

use anyhow::{Context, Result};
use microlens::Model;

use microlens_host::report::inspect::{print_text, summary};

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb).
    pub model: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let bytes = std::fs::read(&args.model)
        .with_context(|| format!("cannot read {}", args.model.display()))?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    let s = summary(&model)?;
    if args.json {
        println!("{s}");
    } else {
        print_text(&s);
    }
    Ok(())
}
