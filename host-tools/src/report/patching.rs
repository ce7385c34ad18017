//! `microlens patch`'s output: the normalised patching tables as text, one JSON object, and a PNG of
//! heatmaps.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::plot::{save, Heatmap, Scale};
use crate::analysis::Patching;
use crate::io::output::Outputs;

/// `table` normalised: 0 is the corrupted run, 1 the clean one.
fn normalized(p: &Patching, table: &[Vec<f64>]) -> Vec<Vec<f64>> {
    table
        .iter()
        .map(|row| row.iter().map(|&x| p.normalized(x)).collect())
        .collect()
}

/// Prints one normalised table.
fn print_table(title: &str, rows: &str, cols: &str, table: &[Vec<f64>]) {
    println!("\n{title} ({rows} x {cols}, 0 = corrupted, 1 = clean):");
    for (i, row) in table.iter().enumerate() {
        let cells: Vec<String> = row.iter().map(|x| format!("{x:>6.2}")).collect();
        println!("  {rows} {i:<3} {}", cells.join(" "));
    }
}

/// The raw and normalised results as one JSON object (`--json`).
pub fn to_json(p: &Patching, answer: u32, wrong: u32) -> Value {
    json!({
        "answer": answer, "wrong": wrong,
        "clean_logit_diff": p.clean, "corrupt_logit_diff": p.corrupt,
        "resid_pre": p.resid_pre, "head_out": p.head_out, "head_out_by_pos": p.head_out_by_pos,
        "normalized": {
            "resid_pre": normalized(p, &p.resid_pre),
            "head_out": normalized(p, &p.head_out),
            "head_out_by_pos": p.head_out_by_pos.iter().map(|t| normalized(p, t)).collect::<Vec<_>>(),
        },
    })
}

/// Prints the logit differences and the normalised residual-stream and head tables.
pub fn print_text(p: &Patching, answer: u32, wrong: u32) {
    println!(
        "logit[{}] - logit[{}] at the last position: clean {:.4}, corrupted {:.4}",
        answer, wrong, p.clean, p.corrupt
    );
    print_table(
        "blocks.L.hook_resid_pre patched",
        "layer",
        "position",
        &normalized(p, &p.resid_pre),
    );
    print_table(
        "attn.hook_z patched at every position",
        "layer",
        "head",
        &normalized(p, &p.head_out),
    );
}

/// The heatmaps of the normalised tables: residual stream by layer and position, head outputs, and
/// each layer's head outputs by position.
pub fn panels(p: &Patching, clean: &[u32]) -> Vec<Heatmap> {
    let positions: Vec<String> = clean
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{i}:{t}"))
        .collect();
    let layers: Vec<String> = (0..p.resid_pre.len()).map(|l| l.to_string()).collect();
    let mut panels = vec![
        Heatmap::new(
            "resid_pre patched (normalised logit diff)",
            normalized(p, &p.resid_pre),
            Scale::SignedUpTo(1.0),
        )
        .axes("layer", "position:token")
        .labels(layers.clone(), positions.clone()),
        Heatmap::new(
            "head output patched, all positions",
            normalized(p, &p.head_out),
            Scale::SignedUpTo(1.0),
        )
        .axes("layer", "head"),
    ];
    for (layer, by_pos) in p.head_out_by_pos.iter().enumerate() {
        let n_heads = by_pos.first().map_or(0, Vec::len);
        panels.push(
            Heatmap::new(
                format!("layer {layer} head output patched by position"),
                normalized(p, by_pos),
                Scale::SignedUpTo(1.0),
            )
            .axes("position:token", "head")
            .labels(
                positions.clone(),
                (0..n_heads).map(|h| h.to_string()).collect(),
            ),
        );
    }
    panels
}

/// The files [`write_plots`] writes.
pub const PLOTS: &[&str] = &["patching.png"];

/// Writes `patching.png` into `dir` (`--plot DIR`) through `outputs`: the [`panels`].
pub fn write_plots(
    p: &Patching,
    clean: &[u32],
    outputs: &Outputs,
    dir: &Path,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let file = dir.join(PLOTS[0]);
    save(outputs, &file, &panels(p, clean), 2, 480)?;
    Ok(vec![file])
}

/// The patching tables as an HTML page (`--html`).
pub fn to_html(p: &Patching, clean: &[u32], answer: u32, wrong: u32) -> Result<String> {
    let summary = [
        ("answer, wrong".to_string(), format!("{answer}, {wrong}")),
        (
            format!("logit[{answer}] - logit[{wrong}], clean"),
            format!("{:.4}", p.clean),
        ),
        ("... corrupted".into(), format!("{:.4}", p.corrupt)),
    ];
    let labels: Vec<String> = clean.iter().map(u32::to_string).collect();
    super::html::heatmap_page::render(
        "patch",
        "microlens patch: activation patching",
        "normalised logit difference with one activation patched from the clean run (0 = corrupted, 1 = clean)",
        &summary,
        &labels,
        &panels(p, clean),
    )
}
