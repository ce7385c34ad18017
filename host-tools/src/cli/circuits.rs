//! `microlens circuits MODEL.mlb`: the framework paper's analyses of a blob: head detectors, copying and
//! composition scores, direct logit attribution, the ablation table, QK/OV skip-trigram and bigram tables,
//! as text, one JSON object (`--json`) and PNG heatmaps (`--plot DIR`), on repeated random sequences or
//! on one given sequence (`--tokens` / `--text`) repeated.

use std::path::PathBuf;

use anyhow::{Context, Result};
use microlens::Model;

use microlens_host::analysis::circuits::{analyse, CircuitOptions, GivenSequence};
use microlens_host::io::output::Outputs;
use microlens_host::report::circuits::{print_text, to_json, write_plots, PLOTS};
use microlens_host::report::plot::check_dir;

use super::text_input::{print_str_tokens, TokenArgs, TokenizerArgs};

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
    /// Comma-separated token ids measured instead of the random sequences: the sequence then its
    /// repeat (TransformerLens's induction test). A leading BOS token (with the BOS rule on) is kept
    /// once, at the start, not repeated: `BOS a b c a b c`. The doubled sequence must fit n_ctx.
    #[arg(long, allow_hyphen_values = true, conflicts_with_all = ["text", "half"])]
    pub tokens: Option<String>,
    /// Text measured instead of the random sequences, tokenized by the model's tokenizer (with the BOS
    /// rule), then repeated as `--tokens`: `BOS text text`.
    #[arg(long, conflicts_with = "half")]
    pub text: Option<String>,
    /// The tokenizer options of `--text` and of the string tokens shown.
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
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
    let input = match (&args.tokens, &args.text) {
        (None, None) => None,
        (tokens, text) => Some(
            TokenArgs {
                tokens: tokens.clone(),
                text: text.clone(),
                tokenizer: args.tokenizer.clone(),
            }
            .resolve(&model, &args.model)?,
        ),
    };
    let given = input.as_ref().map(|input| {
        let bos = input
            .text
            .prepend_bos
            .then(|| input.text.side.tokenizer().ok().and_then(|t| t.bos()))
            .flatten();
        let kept = usize::from(bos.is_some() && input.ids.first() == bos.as_ref());
        GivenSequence {
            prefix: input.ids[..kept].to_vec(),
            body: input.ids[kept..].to_vec(),
        }
    });
    let opts = CircuitOptions {
        given,
        sequences: args.sequences,
        half: args.half,
        seed: args.seed,
        top: args.top,
    };
    let mut report = analyse(&model, &opts)?;
    if let Some(input) = &input {
        report.str_tokens = input.text.str_tokens(&report.seqs[0])?;
    }
    if args.json {
        println!("{}", to_json(&report));
    } else {
        if let Some(str_tokens) = &report.str_tokens {
            print_str_tokens("tokens", str_tokens);
        }
        print_text(&report);
    }
    if let Some(dir) = &args.plot {
        for f in write_plots(&model, &report, &outputs, dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}
