//! `microlens trace`'s output: the restored-probability tables (layer x position) as text, one JSON
//! object, and a PNG of heatmaps.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use microlens::HookKind;
use serde_json::{json, Value};

use super::plot::{save, Heatmap, Scale};
use crate::analysis::tracing::{Trace, TRACED};
use crate::io::output::Outputs;

/// What each traced kind restores, for captions.
fn describe(kind: HookKind) -> &'static str {
    match kind {
        HookKind::ResidPost => "residual stream (hook_resid_post)",
        HookKind::MlpOut => "MLP output (hook_mlp_out)",
        _ => "attention output (hook_attn_out)",
    }
}

/// The trace as one JSON object (`--json`): probabilities and indirect effects `[layer][pos]` per kind.
pub fn to_json(t: &Trace, prompt: &[u32], subject: &std::ops::Range<usize>) -> Value {
    let mut tables = serde_json::Map::new();
    for (k, kind) in TRACED.iter().enumerate() {
        tables.insert(
            kind.suffix().to_string(),
            json!({
                "restored_prob": t.restored[k],
                "indirect_effect": t.indirect_effect(*kind),
                "argmax": t.argmax(*kind),
            }),
        );
    }
    json!({
        "prompt": prompt, "subject": [subject.start, subject.end], "answer": t.answer,
        "clean_prob": t.clean, "corrupted_prob": t.corrupted, "noise": t.noise,
        "tables": tables,
    })
}

/// Prints the probabilities and the three indirect-effect tables.
pub fn print_text(t: &Trace, prompt: &[u32], subject: &std::ops::Range<usize>) {
    println!(
        "answer {}: p = {:.4} clean, {:.4} with the subject (positions {}..{}) corrupted (noise {:.3})",
        t.answer, t.clean, t.corrupted, subject.start, subject.end, t.noise
    );
    let header: Vec<String> = prompt
        .iter()
        .enumerate()
        .map(|(i, tok)| {
            let mark = if subject.contains(&i) { "*" } else { "" };
            format!("{:>8}", format!("{i}:{tok}{mark}"))
        })
        .collect();
    for kind in TRACED {
        let (l, p) = t.argmax(kind);
        println!(
            "\nindirect effect of restoring the {} (layer x position:token, * = subject; max at layer {l}, position {p}):",
            describe(kind)
        );
        println!("          {}", header.join(""));
        for (layer, row) in t.indirect_effect(kind).iter().enumerate() {
            let cells: Vec<String> = row.iter().map(|x| format!("{x:>8.3}")).collect();
            println!("  layer {layer:<2}{}", cells.join(""));
        }
    }
}

/// One heatmap of restored probability per traced kind (layer x position:token, `*` marking the
/// subject).
pub fn panels(t: &Trace, prompt: &[u32], subject: &std::ops::Range<usize>) -> Vec<Heatmap> {
    let positions: Vec<String> = prompt
        .iter()
        .enumerate()
        .map(|(i, tok)| format!("{i}:{tok}{}", if subject.contains(&i) { "*" } else { "" }))
        .collect();
    TRACED
        .iter()
        .enumerate()
        .map(|(k, &kind)| {
            let layers = (0..t.restored[k].len()).map(|l| l.to_string()).collect();
            Heatmap::new(
                format!("p({}) restoring the {}", t.answer, describe(kind)),
                t.restored[k].clone(),
                Scale::Unit(1.0),
            )
            .axes("layer", "position:token")
            .labels(layers, positions.clone())
        })
        .collect()
}

/// The files [`write_plots`] writes.
pub const PLOTS: &[&str] = &["trace.png"];

/// Writes `trace.png` into `dir` (`--plot DIR`) through `outputs`: the [`panels`].
pub fn write_plots(
    t: &Trace,
    prompt: &[u32],
    subject: &std::ops::Range<usize>,
    outputs: &Outputs,
    dir: &Path,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let file = dir.join(PLOTS[0]);
    save(outputs, &file, &panels(t, prompt, subject), 3, 420)?;
    Ok(vec![file])
}

/// The trace as an HTML page (`--html`): the probabilities, the prompt and the [`panels`].
pub fn to_html(t: &Trace, prompt: &[u32], subject: &std::ops::Range<usize>) -> Result<String> {
    let summary = [
        ("answer".to_string(), t.answer.to_string()),
        ("p(answer), clean".into(), format!("{:.4}", t.clean)),
        (
            format!(
                "p(answer), subject {}..{} corrupted",
                subject.start, subject.end
            ),
            format!("{:.4}", t.corrupted),
        ),
        ("noise".into(), format!("{:.3}", t.noise)),
    ];
    let labels: Vec<String> = prompt.iter().map(u32::to_string).collect();
    super::html::heatmap_page::render(
        "trace",
        "microlens trace: causal tracing",
        "probability of the clean answer with one activation restored from the clean run",
        &summary,
        &labels,
        &panels(t, prompt, subject),
    )
}
