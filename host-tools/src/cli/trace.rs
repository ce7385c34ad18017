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
use microlens_host::report::tracing::{print_text, to_html, to_json, write_plots, PLOTS};
use microlens_host::text::span::token_range;

use super::text_input::{Text, TokenizerArgs};

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb), a model with MLPs.
    pub model: PathBuf,
    /// Prompt tokens, comma-separated; the answer traced is the clean run's top next token.
    #[arg(
        long,
        allow_hyphen_values = true,
        required_unless_present = "prompt_text",
        conflicts_with = "prompt_text"
    )]
    pub prompt: Option<String>,
    /// Subject positions `START..END` (end exclusive), corrupted with noise.
    #[arg(
        long,
        required_unless_present = "subject_text",
        conflicts_with = "subject_text"
    )]
    pub subject: Option<String>,
    /// The prompt as text, e.g. "The Eiffel Tower is in".
    #[arg(long, requires = "subject_text")]
    pub prompt_text: Option<String>,
    /// The subject as text, e.g. "The Eiffel Tower": the tokens it covers in --prompt-text.
    #[arg(long, requires = "prompt_text")]
    pub subject_text: Option<String>,
    /// The tokenizer options of --prompt-text.
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
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
    /// Write the heatmaps as one self-contained HTML page to this file.
    #[arg(long)]
    pub html: Option<PathBuf>,
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

/// The prompt's tokens and the subject's positions: by ids (`--prompt`, `--subject`) or by text.
fn prompt_and_subject(args: &Args, text: &Text) -> Result<(Vec<u32>, std::ops::Range<usize>)> {
    match (&args.prompt_text, &args.subject_text) {
        (Some(p), Some(s)) => {
            let encoded = text.encode(p)?;
            let subject = token_range(p, &encoded, s)?;
            Ok((encoded.ids, subject))
        }
        _ => {
            let prompt = args
                .prompt
                .as_deref()
                .context("give --prompt or --prompt-text")?;
            let subject = args
                .subject
                .as_deref()
                .context("give --subject or --subject-text")?;
            Ok((parse_tokens(prompt)?, parse_range(subject)?))
        }
    }
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    anyhow::ensure!(
        args.samples <= 100_000,
        "--samples {} is more than 100000",
        args.samples
    );
    let outputs = Outputs::with_inputs([args.model.as_path()]);
    if let Some(dir) = &args.plot {
        check_dir(&outputs, dir, PLOTS)?;
    }
    if let Some(out) = &args.html {
        outputs.check(out)?;
    }
    let bytes = microlens_host::io::files::read_blob(&args.model)?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    let host = microlens::host::HostWeights::new(&model);
    let model = model.with_host(&host);
    let text = args.tokenizer.open(&model, &args.model)?;
    let (prompt, subject) = prompt_and_subject(&args, &text)?;
    let opts = TraceOptions {
        subject: subject.clone(),
        noise: args.noise,
        samples: args.samples,
        seed: args.seed,
    };
    let t = causal_trace(&model, &prompt, &opts)?;
    let str_tokens = text.str_tokens(&prompt)?;
    if args.json {
        let mut json = to_json(&t, &prompt, &subject);
        if let Some(s) = str_tokens {
            json["str_tokens"] = serde_json::json!(s);
        }
        println!("{json}");
    } else {
        if let Some(s) = &str_tokens {
            super::text_input::print_str_tokens("prompt", s);
        }
        print_text(&t, &prompt, &subject);
    }
    if let Some(dir) = &args.plot {
        for f in write_plots(&t, &prompt, &subject, &outputs, dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    if let Some(out) = &args.html {
        let html = to_html(&t, &prompt, &subject);
        outputs.write(out, html?.as_bytes())?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}
