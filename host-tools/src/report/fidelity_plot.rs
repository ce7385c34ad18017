//! `fidelity --plot DIR`: PNG heatmaps of the per-head figures (layers x heads) and of the composition
//! changes (writer head x reader head), drawn with the shared [`crate::report::plot`] panels.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::plot::{save, Heatmap, Scale};
use crate::fidelity::HeadFidelity;
use crate::fidelity::Report;
use crate::io::output::Outputs;

/// `[layer][head]` grid of one per-head figure.
fn grid(report: &Report, n_heads: usize, f: impl Fn(&HeadFidelity) -> f64) -> Vec<Vec<f64>> {
    report
        .heads
        .chunks(n_heads.max(1))
        .map(|layer| layer.iter().map(&f).collect())
        .collect()
}

/// The per-head grids: attention change, induction, previous-token and copying scores of both models.
fn head_panels(report: &Report, n_heads: usize) -> [Heatmap; 8] {
    let panel = |title: &str, scale, f: &dyn Fn(&HeadFidelity) -> f64| {
        Heatmap::new(title, grid(report, n_heads, f), scale).axes("layer", "head")
    };
    let score = Scale::Unit(1.0);
    let max_diff = report.pattern_max_abs_diff;
    let max_js = report
        .heads
        .iter()
        .map(|h| h.pattern_mean_js)
        .fold(0.0, f64::max);
    // Mean JS is tiny for a close candidate: shown in units of 10^-k so the cell labels are readable.
    let k = if max_js > 0.0 {
        (-max_js.log10()).ceil().max(0.0) as i32
    } else {
        0
    };
    let unit = 10f64.powi(-k);
    let js_title = format!("mean JS of attention rows (1e-{k} nats)");
    [
        panel("max |attention diff|", Scale::Unit(max_diff), &|h| {
            h.pattern_max_abs_diff
        }),
        panel(&js_title, Scale::Unit(max_js / unit), &|h| {
            h.pattern_mean_js / unit
        }),
        panel("induction score (reference)", score, &|h| {
            h.induction_score_ref
        }),
        panel("induction score (candidate)", score, &|h| {
            h.induction_score_cand
        }),
        panel("prev-token score (reference)", score, &|h| {
            h.prev_token_score_ref
        }),
        panel("prev-token score (candidate)", score, &|h| {
            h.prev_token_score_cand
        }),
        panel("copying score (reference)", Scale::Signed, &|h| {
            h.copying_score_ref.unwrap_or(f64::NAN)
        }),
        panel("copying score (candidate)", Scale::Signed, &|h| {
            h.copying_score_cand.unwrap_or(f64::NAN)
        }),
    ]
}

/// The composition changes (candidate - reference), writer head x reader head.
fn composition_panels(report: &Report) -> Vec<Heatmap> {
    let names: Vec<String> = report
        .heads
        .iter()
        .map(|h| format!("L{}H{}", h.layer, h.head))
        .collect();
    let n = names.len();
    report
        .composition
        .iter()
        .map(|c| {
            let diff: Vec<Vec<f64>> = (0..n)
                .map(|i| {
                    (0..n)
                        .map(|j| c.candidate[i * n + j] - c.reference[i * n + j])
                        .collect()
                })
                .collect();
            Heatmap::new(
                format!("{} composition change", c.mode),
                diff,
                Scale::Signed,
            )
            .axes("from (writer)", "to (reader)")
            .labels(names.clone(), names.clone())
        })
        .collect()
}

/// The files [`write_plots`] writes.
pub const PLOTS: &[&str] = &["heads.png", "composition.png"];

/// Writes `heads.png` (per-head grids) and `composition.png` (composition changes) into `dir` through
/// `outputs`; returns the files written.
pub fn write_plots(
    report: &Report,
    n_heads: usize,
    outputs: &Outputs,
    dir: &Path,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let heads_png = dir.join(PLOTS[0]);
    save(outputs, &heads_png, &head_panels(report, n_heads), 2, 360)?;
    let comp_png = dir.join(PLOTS[1]);
    save(outputs, &comp_png, &composition_panels(report), 3, 420)?;
    Ok(vec![heads_png, comp_png])
}
