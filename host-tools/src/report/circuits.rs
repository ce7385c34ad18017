//! `microlens circuits`'s output: text tables, one JSON object and PNG heatmaps of a
//! [`CircuitReport`].

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use microlens::analysis::{Head, HeadPattern};
use microlens::{Config, Model};
use serde_json::{json, Value};

use super::plot::{save, Heatmap, Scale};
use crate::analysis::circuits::{heads, CircuitReport};
use crate::eval::run::run_model;
use crate::io::output::Outputs;

/// The report as one JSON object (`--json`).
pub fn to_json(r: &CircuitReport) -> Value {
    let n = r.cfg.n_heads;
    let head_rows: Vec<Value> = heads(&r.cfg)
        .map(|h| {
            let i = h.index(n);
            json!({
                "layer": h.layer, "head": h.head,
                "prev_token_score": r.scores.get(HeadPattern::PreviousToken, h),
                "duplicate_token_score": r.scores.get(HeadPattern::DuplicateToken, h),
                "induction_score": r.scores.get(HeadPattern::Induction, h),
                "induction_score_repeated": r.scores.induction_repeated[i],
                "copying_score": r.copying[i],
                "ov_copying_score": r.ov_copying[i],
                "direct_logit_attribution": r.dla[i],
                "ablated_loss": r.ablation.per_head[i],
            })
        })
        .collect();
    let composition: Vec<Value> = heads(&r.cfg)
        .flat_map(|from| heads(&r.cfg).filter(move |to| from.layer < to.layer).map(move |to| (from, to)))
        .map(|(from, to)| {
            let [q, k, v] = [0, 1, 2].map(|m| r.composition[m].get(from, to));
            json!({"from_layer": from.layer, "from_head": from.head, "to_layer": to.layer, "to_head": to.head,
                   "q": q, "k": k, "v": v})
        })
        .collect();
    let a = &r.ablation;
    let mut json = json!({
        "sequences": {"count": r.seqs.len(), "length": r.prefix + 2 * r.half, "half": r.half, "prefix": r.prefix,
                      "given": r.given},
        "heads": head_rows,
        "composition": composition,
        "composition_baseline": r.baseline,
        "ablation": {
            "from_pos": a.from_pos,
            "direct_path_only": a.by_layers[0],
            "with_layers": a.by_layers.iter().enumerate().skip(1).map(|(k, l)| json!({"layers": k, "loss": l})).collect::<Vec<_>>(),
            "full": a.by_layers.last(),
            "heads": heads(&r.cfg).map(|h| json!({"layer": h.layer, "head": h.head, "loss": a.per_head[h.index(n)]})).collect::<Vec<_>>(),
        },
        "skip_trigrams": r.skip_trigrams,
        "bigrams": r.bigrams,
    });
    if r.given {
        json["tokens"] = json!(r.seqs[0]);
    }
    if let Some(str_tokens) = &r.str_tokens {
        json["str_tokens"] = json!(str_tokens);
    }
    json
}

/// Prints the report's tables.
pub fn print_text(r: &CircuitReport) {
    let n = r.cfg.n_heads;
    if r.given {
        println!(
            "the given sequence: {} + 2 x {} tokens; loss and attribution on the repeated half",
            r.prefix, r.half
        );
    } else {
        println!(
            "{} repeated random sequences of 2 x {} tokens; loss and attribution on the repeated half",
            r.seqs.len(),
            r.half
        );
    }
    println!(
        "\nhead   prev-tok  dup-tok  induction  (repeated)  copying  OV-copy  DLA(next)  loss ablated"
    );
    for h in heads(&r.cfg) {
        let i = h.index(n);
        let copying = r.copying[i].map_or("     -".into(), |c| format!("{c:>7.3}"));
        println!(
            "{:<6} {:>8.3} {:>8.3} {:>10.3} {:>11.3} {copying} {:>8.3} {:>10.3} {:>13.3}",
            h.to_string(),
            r.scores.get(HeadPattern::PreviousToken, h),
            r.scores.get(HeadPattern::DuplicateToken, h),
            r.scores.get(HeadPattern::Induction, h),
            r.scores.induction_repeated[i],
            r.ov_copying[i],
            r.dla[i],
            r.ablation.per_head[i]
        );
    }
    println!(
        "\ncomposition (random baseline {:.3} ± {:.3}):\nfrom   to        Q       K       V",
        r.baseline.mean, r.baseline.std
    );
    for from in heads(&r.cfg) {
        for to in heads(&r.cfg).filter(|to| from.layer < to.layer) {
            let [q, k, v] = [0, 1, 2].map(|m| r.composition[m].get(from, to));
            println!(
                "{:<6} {:<6} {q:>7.3} {k:>7.3} {v:>7.3}",
                from.to_string(),
                to.to_string()
            );
        }
    }
    println!(
        "\nablation (mean loss in nats from position {}):",
        r.ablation.from_pos
    );
    println!("  direct path only      {:.4}", r.ablation.by_layers[0]);
    for (k, loss) in r.ablation.by_layers.iter().enumerate().skip(1) {
        let layers = if k == 1 {
            "layer 0".to_string()
        } else {
            format!("layers 0-{}", k - 1)
        };
        println!("  with {layers:<17} {loss:.4}");
    }
    println!("  each head ablated: see the last column above");
    println!("\nskip-trigrams (source ... destination -> out), strongest QK pair per head:");
    for t in &r.skip_trigrams {
        if let Some(first) = t["trigrams"].get(0) {
            println!(
                "  L{}H{}: {} ... {} -> {}  (qk {:.2}, ov {:.2})",
                t["layer"],
                t["head"],
                first["source"],
                first["destination"],
                first["out"],
                first["qk"].as_f64().unwrap_or(0.0),
                first["ov"].as_f64().unwrap_or(0.0)
            );
        }
    }
}

/// `f` of every head as a `[layer][head]` grid.
fn grid(cfg: &Config, f: impl Fn(Head) -> f64) -> Vec<Vec<f64>> {
    (0..cfg.n_layers)
        .map(|l| (0..cfg.n_heads).map(|h| f(Head::new(l, h))).collect())
        .collect()
}

/// The Q, K and V composition heatmaps (writer head x reader head).
fn composition_panels(r: &CircuitReport) -> Vec<Heatmap> {
    let cfg = &r.cfg;
    let names: Vec<String> = heads(cfg).map(|h| h.to_string()).collect();
    r.composition
        .iter()
        .map(|c| {
            let m = heads(cfg)
                .map(|from| heads(cfg).map(|to| c.get(from, to)).collect())
                .collect();
            Heatmap::new(
                format!("{}-composition", c.mode.name()),
                m,
                Scale::Unit(1.0),
            )
            .axes("writer head", "reader head")
            .labels(names.clone(), names.clone())
        })
        .collect()
}

/// One layer x head heatmap per score.
fn score_panels(r: &CircuitReport) -> [Heatmap; 6] {
    let cfg = &r.cfg;
    let full = *r.ablation.by_layers.last().unwrap_or(&0.0);
    let unit = Scale::Unit(1.0);
    let panel = |title: &str, scale, f: &dyn Fn(Head) -> f64| {
        Heatmap::new(title, grid(cfg, f), scale).axes("layer", "head")
    };
    [
        panel("previous-token score", unit, &|h| {
            r.scores.get(HeadPattern::PreviousToken, h)
        }),
        panel("duplicate-token score", unit, &|h| {
            r.scores.get(HeadPattern::DuplicateToken, h)
        }),
        panel("induction score", unit, &|h| {
            r.scores.get(HeadPattern::Induction, h)
        }),
        panel("copying score", Scale::Signed, &|h| {
            r.copying[h.index(cfg.n_heads)].unwrap_or(f64::NAN)
        }),
        panel("direct logit attribution", Scale::Signed, &|h| {
            r.dla[h.index(cfg.n_heads)]
        }),
        panel("loss increase when ablated", Scale::Signed, &|h| {
            r.ablation.per_head[h.index(cfg.n_heads)] - full
        }),
    ]
}

/// Every head's attention pattern on the first sequence.
fn pattern_panels(model: &Model<'_>, r: &CircuitReport) -> Result<Vec<Heatmap>> {
    let example = &r.seqs[0];
    let run = run_model(model, example)?;
    let labels: Vec<String> = example.iter().map(|t| t.to_string()).collect();
    Ok(heads(&r.cfg)
        .map(|h| {
            Heatmap::new(
                format!("{h} pattern"),
                run.patterns[h.layer][h.head]
                    .iter()
                    .map(|r| r.iter().map(|&x| x as f64).collect())
                    .collect(),
                Scale::Unit(1.0),
            )
            .axes("query token", "key token")
            .labels(labels.clone(), labels.clone())
        })
        .collect())
}

/// The files [`write_plots`] writes.
pub const PLOTS: &[&str] = &["composition.png", "head_scores.png", "patterns.png"];

/// Writes `composition.png`, `head_scores.png` and `patterns.png` into `dir` (`--plot DIR`) through
/// `outputs`.
pub fn write_plots(
    model: &Model<'_>,
    r: &CircuitReport,
    outputs: &Outputs,
    dir: &Path,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let composition = composition_panels(r);
    let scores = score_panels(r);
    let patterns = pattern_panels(model, r)?;
    let files: Vec<PathBuf> = PLOTS.iter().map(|f| dir.join(f)).collect();
    save(outputs, &files[0], &composition, 3, 420)?;
    save(outputs, &files[1], &scores, 3, 360)?;
    save(outputs, &files[2], &patterns, r.cfg.n_heads, 420)?;
    Ok(files)
}
