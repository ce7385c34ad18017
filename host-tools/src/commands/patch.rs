//! `microlens patch MODEL.mlb --clean 1,2,3 --corrupt 1,7,3 --answer A --wrong B`: activation patching
//! from the clean into the corrupted run, measured by the logit difference `answer - wrong` at the last
//! position: residual stream by layer and position, head outputs over all positions and by position.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use microlens::Model;
use serde_json::json;

use crate::analysis::plot::{save, Heatmap, Scale};
use crate::analysis::{activation_patching, Patching};
use crate::commands::run::parse_tokens;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb).
    pub model: PathBuf,
    /// Clean tokens, comma-separated.
    #[arg(long)]
    pub clean: String,
    /// Corrupted tokens, comma-separated, as many as the clean ones.
    #[arg(long)]
    pub corrupt: String,
    /// The token the clean run should predict at the last position.
    #[arg(long)]
    pub answer: u32,
    /// The token the corrupted run predicts instead.
    #[arg(long)]
    pub wrong: u32,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Write PNG heatmaps of the patching tables into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

fn normalized(p: &Patching, table: &[Vec<f64>]) -> Vec<Vec<f64>> {
    table
        .iter()
        .map(|row| row.iter().map(|&x| p.normalized(x)).collect())
        .collect()
}

fn print_table(title: &str, rows: &str, cols: &str, table: &[Vec<f64>]) {
    println!("\n{title} ({rows} x {cols}, 0 = corrupted, 1 = clean):");
    for (i, row) in table.iter().enumerate() {
        let cells: Vec<String> = row.iter().map(|x| format!("{x:>6.2}")).collect();
        println!("  {rows} {i:<3} {}", cells.join(" "));
    }
}

fn write_plots(p: &Patching, clean: &[u32], dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
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
    let file = dir.join("patching.png");
    save(&file, &panels, 2, 480)?;
    Ok(vec![file])
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let (clean, corrupt) = (parse_tokens(&args.clean)?, parse_tokens(&args.corrupt)?);
    let bytes = std::fs::read(&args.model)
        .with_context(|| format!("cannot read {}", args.model.display()))?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    // The host's column-blocked weights: the same bits, faster.
    let host = microlens::host::HostWeights::new(&model);
    let model = model.with_host(&host);
    let p = activation_patching(&model, &clean, &corrupt, args.answer, args.wrong)?;
    if args.json {
        let v = json!({
            "answer": args.answer, "wrong": args.wrong,
            "clean_logit_diff": p.clean, "corrupt_logit_diff": p.corrupt,
            "resid_pre": p.resid_pre, "head_out": p.head_out, "head_out_by_pos": p.head_out_by_pos,
            "normalized": {
                "resid_pre": normalized(&p, &p.resid_pre),
                "head_out": normalized(&p, &p.head_out),
                "head_out_by_pos": p.head_out_by_pos.iter().map(|t| normalized(&p, t)).collect::<Vec<_>>(),
            },
        });
        println!("{v}");
    } else {
        println!(
            "logit[{}] - logit[{}] at the last position: clean {:.4}, corrupted {:.4}",
            args.answer, args.wrong, p.clean, p.corrupt
        );
        print_table(
            "blocks.L.hook_resid_pre patched",
            "layer",
            "position",
            &normalized(&p, &p.resid_pre),
        );
        print_table(
            "attn.hook_z patched at every position",
            "layer",
            "head",
            &normalized(&p, &p.head_out),
        );
    }
    if let Some(dir) = &args.plot {
        for f in write_plots(&p, &clean, dir)? {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(())
}
