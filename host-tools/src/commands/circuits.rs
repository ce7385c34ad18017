//! `microlens circuits MODEL.mlb`: the framework paper's analyses of a blob: head detectors, copying and
//! composition scores, direct logit attribution, the ablation table, QK/OV skip-trigram and bigram tables,
//! as text, one JSON object (`--json`) and PNG heatmaps (`--plot DIR`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use microlens::analysis::{Head, HeadPattern};
use microlens::{Config, Model};
use serde_json::{json, Value};

use crate::analysis::plot::{save, Heatmap, Scale};
use crate::analysis::{
    ablation_table, all_composition_scores, bigram_circuit, composition_baseline,
    direct_logit_attribution, full_ov_copying_score, head_scores, ov_circuit, ov_copying_score,
    qk_circuit, repeated_random_tokens, skip_trigrams, AblationTable, Baseline, CircuitWeights,
    CompositionMode, CompositionScores, HeadScores,
};
use crate::run::run_model;

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

/// Everything the command computes.
struct Report {
    cfg: Config,
    seqs: Vec<Vec<u32>>,
    half: usize,
    scores: HeadScores,
    copying: Vec<Option<f64>>,
    ov_copying: Vec<f64>,
    dla: Vec<f64>,
    composition: [CompositionScores; 3],
    baseline: Baseline,
    ablation: AblationTable,
    skip_trigrams: Vec<Value>,
    bigrams: Value,
}

fn heads(cfg: &Config) -> impl Iterator<Item = Head> {
    let n = cfg.n_heads;
    (0..cfg.n_layers).flat_map(move |l| (0..n).map(move |h| Head::new(l, h)))
}

/// Mean per-head direct logit attribution to the correct next token over the repeated halves.
fn mean_dla(model: &Model<'_>, seqs: &[Vec<u32>], half: usize) -> Result<Vec<f64>> {
    let cfg = model.config();
    let mut sum = vec![0.0; cfg.n_layers * cfg.n_heads];
    let mut count = 0usize;
    for tokens in seqs {
        for row in direct_logit_attribution(model, tokens)?.iter().skip(half) {
            sum.iter_mut().zip(row).for_each(|(s, &x)| *s += x as f64);
            count += 1;
        }
    }
    Ok(sum.into_iter().map(|s| s / count.max(1) as f64).collect())
}

fn analyse(model: &Model<'_>, args: &Args) -> Result<Report> {
    let cfg = *model.config();
    let w = CircuitWeights::from_model(model)?;
    let half = args
        .half
        .unwrap_or((cfg.n_ctx / 2).min(32))
        .clamp(1, cfg.n_ctx / 2);
    let seqs = repeated_random_tokens(cfg.d_vocab, half, args.sequences.max(1), args.seed);
    let square = cfg.d_vocab == cfg.d_vocab_out;
    let copying = heads(&cfg)
        .map(|h| square.then(|| full_ov_copying_score(&w.w_e, w.head(h), &w.w_u)))
        .collect();
    let skip_trigrams = heads(&cfg)
        .map(|h| {
            let (qk, ov) = (
                qk_circuit(&w.w_e, w.head(h)),
                ov_circuit(&w.w_e, w.head(h), &w.w_u),
            );
            json!({"layer": h.layer, "head": h.head, "trigrams": skip_trigrams(&qk, &ov, args.top)})
        })
        .collect();
    let bigram = bigram_circuit(&w.w_e, &w.w_u);
    Ok(Report {
        cfg,
        half,
        scores: head_scores(model, &seqs)?,
        copying,
        ov_copying: heads(&cfg).map(|h| ov_copying_score(w.head(h))).collect(),
        dla: mean_dla(model, &seqs, half)?,
        composition: CompositionMode::ALL.map(|m| all_composition_scores(&w, m)),
        baseline: composition_baseline(cfg.d_model, cfg.d_head, 200, args.seed),
        ablation: ablation_table(model, &seqs, half)?,
        skip_trigrams,
        bigrams: json!({"top": bigram.top_entries(args.top, true), "bottom": bigram.top_entries(args.top, false)}),
        seqs,
    })
}

fn to_json(r: &Report) -> Value {
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
    json!({
        "sequences": {"count": r.seqs.len(), "length": 2 * r.half, "half": r.half},
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
    })
}

fn print_text(r: &Report) {
    let n = r.cfg.n_heads;
    println!(
        "{} repeated random sequences of 2 x {} tokens; loss and attribution on the repeated half",
        r.seqs.len(),
        r.half
    );
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

fn grid(cfg: &Config, f: impl Fn(Head) -> f64) -> Vec<Vec<f64>> {
    (0..cfg.n_layers)
        .map(|l| (0..cfg.n_heads).map(|h| f(Head::new(l, h))).collect())
        .collect()
}

fn write_plots(model: &Model<'_>, r: &Report, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cfg = &r.cfg;
    let names: Vec<String> = heads(cfg).map(|h| h.to_string()).collect();
    let composition: Vec<Heatmap> = r
        .composition
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
        .collect();
    let full = *r.ablation.by_layers.last().unwrap_or(&0.0);
    let unit = Scale::Unit(1.0);
    let panel = |title: &str, scale, f: &dyn Fn(Head) -> f64| {
        Heatmap::new(title, grid(cfg, f), scale).axes("layer", "head")
    };
    let scores = [
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
    ];
    let example = &r.seqs[0];
    let run = run_model(model, example)?;
    let labels: Vec<String> = example.iter().map(|t| t.to_string()).collect();
    let patterns: Vec<Heatmap> = heads(cfg)
        .map(|h| {
            Heatmap::new(
                format!("{h} pattern"),
                run.patterns[h.layer][h.head]
                    .iter()
                    .map(|r| r.iter().map(|&x| x as f64).collect())
                    .collect(),
                unit,
            )
            .axes("query token", "key token")
            .labels(labels.clone(), labels.clone())
        })
        .collect();
    let files = [
        dir.join("composition.png"),
        dir.join("head_scores.png"),
        dir.join("patterns.png"),
    ];
    save(&files[0], &composition, 3, 420)?;
    save(&files[1], &scores, 3, 360)?;
    save(&files[2], &patterns, cfg.n_heads, 420)?;
    Ok(files.to_vec())
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let bytes = std::fs::read(&args.model)
        .with_context(|| format!("cannot read {}", args.model.display()))?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    // The host's column-blocked weights: the same bits, faster.
    let host = microlens::host::HostWeights::new(&model);
    let model = model.with_host(&host);
    let report = analyse(&model, &args)?;
    if args.json {
        println!("{}", to_json(&report));
    } else {
        print_text(&report);
    }
    if let Some(dir) = &args.plot {
        for f in write_plots(&model, &report, dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}
