//! `microlens fidelity REFERENCE.mlb CANDIDATE.mlb`: how closely a (quantised) candidate follows the
//! reference, whole model and head by head, on random induction sequences or on the sequences of a file.

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use microlens::Model;
use serde_json::json;

use microlens_host::eval::emulation::{Int8Emulation, Int8Rounding};
use microlens_host::eval::integer_emulation::{IntegerEmulation, IntegerStep};
use microlens_host::eval::run::{check_sequences, check_tokens, DEFAULT_MAX_SEQ_LEN};
use microlens_host::eval::sequences::induction_sequences;
use microlens_host::fidelity::{compare_with, mark_emulated, Report};
use microlens_host::io::output::Outputs;
use microlens_host::io::tokens::read_token_file;
use microlens_host::quantize::calibration::Source;
use microlens_host::quantize::ranges::Ranges;
use microlens_host::report::fidelity_plot::{write_plots, PLOTS};
use microlens_host::report::plot::check_dir;
use microlens_host::text::corpus::{read_text_file, windows};

use super::text_input::TokenizerArgs;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The reference blob (typically f32).
    pub reference: PathBuf,
    /// The candidate blob (typically the same model quantised).
    pub candidate: PathBuf,
    /// Number of random sequences (each a random prefix, then a random segment repeated).
    #[arg(long, default_value_t = 200)]
    pub sequences: usize,
    /// Length of each random sequence [default: the model's n_ctx, at most 256].
    #[arg(long)]
    pub seq_len: Option<usize>,
    /// Seed of the random sequences.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Use these sequences instead: one comma-separated sequence of token ids per line.
    #[arg(long, conflicts_with = "text_file")]
    pub tokens: Option<PathBuf>,
    /// Use windows of this UTF-8 text instead: its tokens cut into consecutive windows of --seq-len
    /// (each starting with BOS when the model prepends one).
    #[arg(long, value_name = "FILE")]
    pub text_file: Option<PathBuf>,
    /// The tokenizer options of --text-file (the reference's tokenizer).
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Write PNG heatmaps of the per-head figures into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Run the candidate with these int8 roundings of a W8A8 model emulated on top of its own arithmetic
    /// (comma-separated): on an f32 candidate, what each rounding costs with exact weights.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub emulate_int8: Vec<Int8Rounding>,
    /// Run the candidate with these steps of the integer-only arithmetic emulated in its own forward
    /// (comma-separated), their inputs quantised with ranges calibrated on the candidate's forward
    /// (256 random sequences, seed 1): on an f32 candidate, what each integer step costs.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        conflicts_with = "emulate_int8"
    )]
    pub emulate_integer: Vec<IntegerStep>,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    microlens_host::io::files::read_blob(path)
}

/// `path (dtypes of its matrices, activations)`, as JSON.
pub(super) fn describe(path: &Path, model: &Model<'_>) -> serde_json::Value {
    microlens_host::fidelity::describe(&path.display().to_string(), model)
}

/// Prints `report` as JSON (with the two descriptions as "reference" and "candidate") or as the
/// table under one line per description.
pub(super) fn print_report(
    report: &Report,
    json: bool,
    reference: serde_json::Value,
    candidate: serde_json::Value,
) -> Result<()> {
    if json {
        let mut v = serde_json::to_value(report)?;
        v["reference"] = reference;
        v["candidate"] = candidate;
        println!("{v}");
        return Ok(());
    }
    for (name, d) in [("reference", &reference), ("candidate", &candidate)] {
        println!(
            "{name}: {} ({} bytes, matrices {}, activations {})",
            d["path"].as_str().unwrap_or("?"),
            d["bytes"],
            d["dtypes"],
            d["activations"].as_str().unwrap_or("?")
        );
        if let Some(note) = d["note"].as_str() {
            println!("{note}");
        }
    }
    print!("{}", report.table());
    Ok(())
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let mut outputs = Outputs::with_inputs([args.reference.as_path(), args.candidate.as_path()]);
    for path in [&args.tokens, &args.text_file].into_iter().flatten() {
        outputs.input(path);
    }
    if let Some(dir) = &args.plot {
        check_dir(&outputs, dir, PLOTS)?;
    }
    let (ref_bytes, cand_bytes) = (read(&args.reference)?, read(&args.candidate)?);
    let reference =
        Model::from_bytes(&ref_bytes).with_context(|| args.reference.display().to_string())?;
    let candidate =
        Model::from_bytes(&cand_bytes).with_context(|| args.candidate.display().to_string())?;
    let cfg = reference.config();
    let len = args.seq_len.unwrap_or(cfg.n_ctx.min(DEFAULT_MAX_SEQ_LEN));
    ensure!(
        args.tokens.is_some() || (1..=cfg.n_ctx).contains(&len),
        "--seq-len must be in 1..={} (n_ctx)",
        cfg.n_ctx
    );
    let seqs = match (&args.tokens, &args.text_file) {
        (Some(path), _) => {
            let seqs = read_token_file(path)?;
            check_sequences("--tokens", seqs.len(), cfg.n_ctx)?;
            seqs
        }
        (None, Some(path)) => {
            ensure!(
                reference.tokenizer().is_none()
                    || candidate.tokenizer().is_none()
                    || reference.tokenizer() == candidate.tokenizer(),
                "the reference and the candidate were converted with different tokenizers"
            );
            let text = args.tokenizer.open(&reference, &args.reference)?;
            let corpus = read_text_file(path)?;
            windows(text.side.tokenizer()?, &corpus, len, text.prepend_bos)
                .with_context(|| path.display().to_string())?
        }
        (None, None) => {
            check_sequences("--sequences", args.sequences, len)?;
            induction_sequences(args.sequences, len, cfg.d_vocab, args.seed)
        }
    };
    for (i, s) in seqs.iter().enumerate() {
        check_tokens(&reference, s).with_context(|| format!("sequence {}", i + 1))?;
    }

    let bar = ProgressBar::new(seqs.len() as u64);
    bar.set_style(ProgressStyle::with_template(
        "{bar:30} {pos}/{len} sequences [{elapsed_precise}]",
    )?);
    let report = if args.emulate_integer.is_empty() {
        let mut emulation = Int8Emulation::new(&candidate, &args.emulate_int8);
        compare_with(&reference, &candidate, &mut emulation, &seqs, || bar.inc(1))?
    } else {
        let calibration = Source::default().sequences(&candidate)?;
        let ranges = Ranges::calibrate(&candidate, &calibration)?;
        let mut emulation = IntegerEmulation::new(&candidate, &args.emulate_integer, ranges)?;
        compare_with(&reference, &candidate, &mut emulation, &seqs, || bar.inc(1))?
    };
    bar.finish_and_clear();

    let emulated: Vec<&str> = (args.emulate_int8.iter().map(|r| r.name()))
        .chain(args.emulate_integer.iter().map(|s| s.name()))
        .collect();
    let plots = match &args.plot {
        Some(dir) => write_plots(&report, cfg.n_heads, &outputs, dir)?,
        None => Vec::new(),
    };
    let (r, mut c) = (
        describe(&args.reference, &reference),
        describe(&args.candidate, &candidate),
    );
    if args.json {
        let int8: Vec<&str> = args.emulate_int8.iter().map(|r| r.name()).collect();
        let integer: Vec<&str> = args.emulate_integer.iter().map(|s| s.name()).collect();
        mark_emulated(&mut c, &int8, &integer);
    } else if !emulated.is_empty() {
        c["note"] = json!(format!(
            "candidate run with emulated {}: {}",
            if args.emulate_integer.is_empty() {
                "int8 roundings"
            } else {
                "integer steps"
            },
            emulated.join(", ")
        ));
    }
    print_report(&report, args.json, r, c)?;
    plots.iter().for_each(|p| println!("wrote {}", p.display()));
    Ok(())
}
