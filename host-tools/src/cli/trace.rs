//! `microlens trace MODEL.mlb --prompt 3,17,33 --subject 0..2`: causal tracing as ROME does it: corrupt
//! the subject's embeddings with noise, restore each layer's residual stream, MLP output and attention
//! output at each position from the clean run, and report how much of the clean answer's probability
//! comes back.

use std::path::PathBuf;

use anyhow::{Context, Result};
use microlens::Model;

use microlens_host::analysis::tracing::{causal_trace, TraceOptions};
use microlens_host::io::output::Outputs;
use microlens_host::io::tokens::parse_tokens;
use microlens_host::report::plot::check_dir;
use microlens_host::report::tracing::{print_text, to_json, write_plots, PLOTS};

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb), a model with MLPs.
    pub model: PathBuf,
    /// Prompt tokens, comma-separated; the answer traced is the clean run's top next token.
    #[arg(long, allow_hyphen_values = true)]
    pub prompt: String,
    /// Subject positions `START..END` (end exclusive), corrupted with noise.
    #[arg(long)]
    pub subject: String,
    /// Noise standard deviation [default: 3 x the std of W_E's entries].
    #[arg(long, allow_hyphen_values = true)]
    pub noise: Option<f64>,
    /// Noise draws averaged.
    #[arg(long, default_value_t = 10)]
    pub samples: usize,
    /// Seed of the noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Write PNG heatmaps of the tables into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// `START..END` as a range.
pub fn parse_range(s: &str) -> Result<std::ops::Range<usize>> {
    let quoted = || microlens_host::excerpt::excerpt(s);
    let (a, b) = s
        .split_once("..")
        .with_context(|| format!("--subject `{}` is not START..END", quoted()))?;
    let num = |x: &str| {
        x.trim().parse::<usize>().with_context(|| {
            format!(
                "--subject `{}`: `{}` is not a position",
                quoted(),
                microlens_host::excerpt::excerpt(x)
            )
        })
    };
    Ok(num(a)?..num(b)?)
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let prompt = parse_tokens(&args.prompt)?;
    let subject = parse_range(&args.subject)?;
    anyhow::ensure!(
        args.samples <= 100_000,
        "--samples {} is more than 100000",
        args.samples
    );
    let outputs = Outputs::with_inputs([args.model.as_path()]);
    if let Some(dir) = &args.plot {
        check_dir(&outputs, dir, PLOTS)?;
    }
    let bytes = microlens_host::io::files::read_blob(&args.model)?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    let host = microlens::host::HostWeights::new(&model);
    let model = model.with_host(&host);
    let opts = TraceOptions {
        subject: subject.clone(),
        noise: args.noise,
        samples: args.samples,
        seed: args.seed,
    };
    let t = causal_trace(&model, &prompt, &opts)?;
    if args.json {
        println!("{}", to_json(&t, &prompt, &subject));
    } else {
        print_text(&t, &prompt, &subject);
    }
    if let Some(dir) = &args.plot {
        for f in write_plots(&t, &prompt, &subject, &outputs, dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}
