//! `microlens report REFERENCE.mlb [CANDIDATE.mlb] (--tokens 1,2,3 | --sequences N) -o report.html`:
//! one self-contained HTML page of every head, the reference and the candidate side by side.

use std::path::PathBuf;

use anyhow::{Context, Result};
use microlens::Model;

use microlens_host::analysis::composition_baseline;
use microlens_host::analysis::head_figures::{top_token, HeadFigures};
use microlens_host::fidelity::compare;
use microlens_host::io::output::Outputs;
use microlens_host::report::html::report_page::{render, ModelView, ReportPage};
use microlens_host::report::inspect::summary;

use super::token_input::TokenInput;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The reference blob (typically f32).
    pub reference: PathBuf,
    /// The candidate blob (typically the same model quantised), shown beside the reference.
    pub candidate: Option<PathBuf>,
    /// The tokens.
    #[command(flatten)]
    pub input: TokenInput,
    /// The HTML file to write.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Samples of the composition scores' random baseline (as `circuits`).
const BASELINE_SAMPLES: usize = 200;

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let mut outputs = Outputs::with_inputs([args.reference.as_path()]);
    if let Some(candidate) = &args.candidate {
        outputs.input(candidate);
    }
    // Refused before any work: writing over an input, or into a FIFO or device.
    outputs.check(&args.output)?;
    let ref_bytes = microlens_host::io::files::read_blob(&args.reference)?;
    let cand_bytes = match &args.candidate {
        Some(p) => Some(microlens_host::io::files::read_blob(p)?),
        None => None,
    };
    let reference =
        Model::from_bytes(&ref_bytes).with_context(|| args.reference.display().to_string())?;
    let candidate = match (&cand_bytes, &args.candidate) {
        (Some(b), Some(p)) => Some(Model::from_bytes(b).with_context(|| p.display().to_string())?),
        _ => None,
    };
    let tokens = args.input.resolve(&reference, &args.reference)?;
    // The host's column-blocked weights: the same bits, faster.
    let ref_host = microlens::host::HostWeights::new(&reference);
    let fast_ref = reference.with_host(&ref_host);
    let ref_figures = HeadFigures::measure(&fast_ref, &tokens.sequences, tokens.shown(), None)?;
    let dla_token = top_token(&ref_figures.run);
    let (cand_figures, fidelity) = match &candidate {
        Some(c) => {
            // Shapes first (a clear error), then the figures.
            let report = compare(&reference, c, &tokens.sequences, || {})?;
            let host = microlens::host::HostWeights::new(c);
            let fast = c.with_host(&host);
            let figures =
                HeadFigures::measure(&fast, &tokens.sequences, tokens.shown(), Some(dla_token))?;
            (Some(figures), Some(report))
        }
        None => (None, None),
    };
    let cfg = reference.config();
    let page = ReportPage {
        reference: ModelView {
            path: args.reference.display().to_string(),
            summary: summary(&reference)?,
            figures: &ref_figures,
        },
        candidate: match (&candidate, &cand_figures, &args.candidate) {
            (Some(c), Some(f), Some(p)) => Some(ModelView {
                path: p.display().to_string(),
                summary: summary(c)?,
                figures: f,
            }),
            _ => None,
        },
        tokens: tokens.shown(),
        labels: tokens.labels(&reference),
        prompt: tokens.text(&reference),
        sequences: tokens.sequences.len(),
        dla_token,
        fidelity: fidelity.as_ref(),
        baseline: composition_baseline(cfg.d_model, cfg.d_head, BASELINE_SAMPLES, 0),
    };
    let html = render(&page)?;
    outputs.write(&args.output, html.as_bytes())?;
    eprintln!("wrote {} ({} bytes)", args.output.display(), html.len());
    Ok(())
}
