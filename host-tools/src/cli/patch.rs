//! `microlens patch MODEL.mlb --clean 1,2,3 --corrupt 1,7,3 --answer A --wrong B`: activation patching
//! from the clean into the corrupted run, measured by the logit difference `answer - wrong` at the last
//! position: residual stream by layer and position, head outputs over all positions and by position.

use std::path::PathBuf;

use anyhow::{ensure, Context, Result};
use microlens::Model;

use microlens_host::analysis::activation_patching;
use microlens_host::io::output::Outputs;
use microlens_host::io::tokens::parse_tokens;
use microlens_host::report::patching::{print_text, to_json, write_plots, PLOTS};
use microlens_host::report::plot::check_dir;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb).
    pub model: PathBuf,
    /// Clean tokens, comma-separated.
    #[arg(long, allow_hyphen_values = true)]
    pub clean: String,
    /// Corrupted tokens, comma-separated, as many as the clean ones.
    #[arg(long, allow_hyphen_values = true)]
    pub corrupt: String,
    /// The token the clean run should predict at the last position.
    #[arg(long)]
    pub answer: u32,
    /// The token the corrupted run predicts instead.
    #[arg(long)]
    pub wrong: u32,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Write PNG heatmaps of the patching tables into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let (clean, corrupt) = (parse_tokens(&args.clean)?, parse_tokens(&args.corrupt)?);
    ensure!(
        args.answer != args.wrong,
        "--answer and --wrong are both {}: their logit difference is always 0",
        args.answer
    );
    ensure!(
        clean != corrupt,
        "the clean and corrupted sequences are identical: patching one into the other changes nothing"
    );
    let outputs = Outputs::with_inputs([args.model.as_path()]);
    if let Some(dir) = &args.plot {
        check_dir(&outputs, dir, PLOTS)?;
    }
    let bytes = microlens_host::io::files::read_blob(&args.model)?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    // The host's column-blocked weights: the same bits, faster.
    let host = microlens::host::HostWeights::new(&model);
    let model = model.with_host(&host);
    let p = activation_patching(&model, &clean, &corrupt, args.answer, args.wrong)?;
    ensure!(
        p.clean != p.corrupt,
        "the clean and corrupted runs have the same logit difference ({}): the normalised tables would \
         be 0/0",
        p.clean
    );
    if args.json {
        println!("{}", to_json(&p, args.answer, args.wrong));
    } else {
        print_text(&p, args.answer, args.wrong);
    }
    if let Some(dir) = &args.plot {
        for f in write_plots(&p, &clean, &outputs, dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}
