//! `microlens patch MODEL.mlb --clean 1,2,3 --corrupt 1,7,3 --answer A --wrong B`: activation patching
//! from the clean into the corrupted run, measured by the logit difference `answer - wrong` at the last
//! position: residual stream by layer and position, head outputs over all positions and by position.

use std::path::PathBuf;

use anyhow::{ensure, Context, Result};
use microlens::Model;

use microlens_host::analysis::activation_patching;
use microlens_host::io::output::Outputs;
use microlens_host::io::tokens::parse_tokens;
use microlens_host::report::patching::{print_text, to_html, to_json, write_plots, PLOTS};
use microlens_host::report::plot::check_dir;

use super::text_input::{Text, TokenizerArgs};

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb).
    pub model: PathBuf,
    /// Clean tokens, comma-separated.
    #[arg(
        long,
        allow_hyphen_values = true,
        required_unless_present = "clean_text",
        conflicts_with = "clean_text"
    )]
    pub clean: Option<String>,
    /// Corrupted tokens, comma-separated, as many as the clean ones.
    #[arg(
        long,
        allow_hyphen_values = true,
        required_unless_present = "corrupt_text",
        conflicts_with = "corrupt_text"
    )]
    pub corrupt: Option<String>,
    /// The token the clean run should predict at the last position.
    #[arg(
        long,
        required_unless_present = "answer_text",
        conflicts_with = "answer_text"
    )]
    pub answer: Option<u32>,
    /// The token the corrupted run predicts instead.
    #[arg(
        long,
        required_unless_present = "wrong_text",
        conflicts_with = "wrong_text"
    )]
    pub wrong: Option<u32>,
    /// The clean sequence as text.
    #[arg(long)]
    pub clean_text: Option<String>,
    /// The corrupted sequence as text (as many tokens as the clean one).
    #[arg(long)]
    pub corrupt_text: Option<String>,
    /// The answer as text (one token, e.g. " Mary").
    #[arg(long)]
    pub answer_text: Option<String>,
    /// The wrong answer as text (one token).
    #[arg(long)]
    pub wrong_text: Option<String>,
    /// The tokenizer options of the text arguments.
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Write the heatmaps as one self-contained HTML page to this file.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Write PNG heatmaps of the patching tables into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let outputs = Outputs::with_inputs([args.model.as_path()]);
    if let Some(dir) = &args.plot {
        check_dir(&outputs, dir, PLOTS)?;
    }
    if let Some(out) = &args.html {
        outputs.check(out)?;
    }
    let bytes = microlens_host::io::files::read_blob(&args.model)?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    let text = args.tokenizer.open(&model, &args.model)?;
    let clean = sequence(&text, &args.clean, &args.clean_text)?;
    let corrupt = sequence(&text, &args.corrupt, &args.corrupt_text)?;
    let answer = token(&text, args.answer, &args.answer_text, "--answer-text")?;
    let wrong = token(&text, args.wrong, &args.wrong_text, "--wrong-text")?;
    ensure!(
        answer != wrong,
        "--answer and --wrong are both {answer}: their logit difference is always 0"
    );
    ensure!(
        clean != corrupt,
        "the clean and corrupted sequences are identical: patching one into the other changes nothing"
    );
    // The host's column-blocked weights: the same bits, faster.
    let host = microlens::host::HostWeights::new(&model);
    let model = model.with_host(&host);
    let p = activation_patching(&model, &clean, &corrupt, answer, wrong)?;
    ensure!(
        p.clean != p.corrupt,
        "the clean and corrupted runs have the same logit difference ({}): the normalised tables would \
         be 0/0",
        p.clean
    );
    let (clean_str, corrupt_str) = (text.str_tokens(&clean)?, text.str_tokens(&corrupt)?);
    if args.json {
        let mut json = to_json(&p, answer, wrong);
        if let (Some(c), Some(x)) = (clean_str, corrupt_str) {
            json["clean_str_tokens"] = serde_json::json!(c);
            json["corrupt_str_tokens"] = serde_json::json!(x);
        }
        println!("{json}");
    } else {
        if let (Some(c), Some(x)) = (&clean_str, &corrupt_str) {
            super::text_input::print_str_tokens("clean", c);
            super::text_input::print_str_tokens("corrupt", x);
        }
        print_text(&p, answer, wrong);
    }
    if let Some(dir) = &args.plot {
        for f in write_plots(&p, &clean, &outputs, dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    if let Some(out) = &args.html {
        let html = to_html(&p, &clean, answer, wrong);
        outputs.write(out, html?.as_bytes())?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

/// A sequence by ids or by text.
fn sequence(text: &Text, ids: &Option<String>, words: &Option<String>) -> Result<Vec<u32>> {
    match (ids, words) {
        (Some(ids), _) => parse_tokens(ids),
        (None, Some(words)) => Ok(text.encode(words)?.ids),
        (None, None) => anyhow::bail!("give the clean and corrupted sequences"),
    }
}

/// A token by id or by text (one token).
fn token(text: &Text, id: Option<u32>, words: &Option<String>, what: &str) -> Result<u32> {
    match (id, words) {
        (Some(id), _) => Ok(id),
        (None, Some(words)) => text.one_token(words, what),
        (None, None) => anyhow::bail!("give {what} or its id"),
    }
}
