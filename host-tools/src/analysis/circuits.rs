//! Every analysis of `microlens circuits` at once: head detectors, copying and composition scores,
//! direct logit attribution, the ablation table, QK/OV skip-trigram and bigram tables, on repeated
//! random sequences. The `report::circuits` module renders the result.

use anyhow::{ensure, Result};
use microlens::analysis::Head;
use microlens::{Config, Model};
use serde_json::{json, Value};

use super::{
    ablation_table, all_composition_scores, bigram_circuit, composition_baseline,
    direct_logit_attribution, full_ov_copying_score, head_scores, ov_circuit, ov_copying_score,
    qk_circuit, skip_trigrams, AblationTable, Baseline, CircuitWeights, CompositionMode,
    CompositionScores, HeadScores,
};
use crate::eval::run::check_sequences;
use crate::eval::sequences::repeated_random_tokens;

/// What [`analyse`] measures on.
#[derive(Clone, Copy, Debug)]
pub struct CircuitOptions {
    /// Number of repeated random sequences for the detectors, attribution and ablation.
    pub sequences: usize,
    /// Length of each random half [default: min(n_ctx / 2, 32)].
    pub half: Option<usize>,
    /// Seed of the random sequences and of the composition baseline.
    pub seed: u64,
    /// Rows of the skip-trigram and bigram tables.
    pub top: usize,
}

/// Everything `microlens circuits` computes about a model.
pub struct CircuitReport {
    /// The model's config.
    pub cfg: Config,
    /// The repeated random sequences.
    pub seqs: Vec<Vec<u32>>,
    /// Length of each random half.
    pub half: usize,
    /// Head detector scores.
    pub scores: HeadScores,
    /// Full-OV copying score per head (`None` unless `d_vocab == d_vocab_out`).
    pub copying: Vec<Option<f64>>,
    /// OV copying score per head.
    pub ov_copying: Vec<f64>,
    /// Mean direct logit attribution per head to the correct next token.
    pub dla: Vec<f64>,
    /// Q, K and V composition scores.
    pub composition: [CompositionScores; 3],
    /// The composition scores' random baseline.
    pub baseline: Baseline,
    /// The ablation table.
    pub ablation: AblationTable,
    /// The top skip-trigrams of every head (JSON rows).
    pub skip_trigrams: Vec<Value>,
    /// The strongest and weakest bigrams (JSON).
    pub bigrams: Value,
}

/// Every head, layer by layer.
pub fn heads(cfg: &Config) -> impl Iterator<Item = Head> {
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

/// Runs every analysis of `microlens circuits` on `model`.
pub fn analyse(model: &Model<'_>, args: &CircuitOptions) -> Result<CircuitReport> {
    let cfg = *model.config();
    let w = CircuitWeights::from_model(model)?;
    ensure!(
        cfg.n_ctx >= 2,
        "circuits runs sequences of two repeated halves: it needs n_ctx >= 2, the model has n_ctx = {}",
        cfg.n_ctx
    );
    let half = args.half.unwrap_or((cfg.n_ctx / 2).min(32));
    ensure!(
        (1..=cfg.n_ctx / 2).contains(&half),
        "--half {half} is outside 1..={} (n_ctx / 2)",
        cfg.n_ctx / 2
    );
    check_sequences("--sequences", args.sequences, 2 * half)?;
    let seqs = repeated_random_tokens(cfg.d_vocab, half, args.sequences, args.seed);
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
    Ok(CircuitReport {
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
