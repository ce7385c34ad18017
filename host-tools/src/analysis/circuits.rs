//! Every analysis of `microlens circuits` at once: head detectors, copying and composition scores,
//! direct logit attribution, the ablation table, QK/OV skip-trigram and bigram tables, on repeated
//! random sequences or on one given sequence repeated. The `report::circuits` module renders the result.

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
use crate::eval::run::{check_sequences, check_vocab};
use crate::eval::sequences::repeated_random_tokens;

/// A given sequence measured instead of the random ones: `prefix` (the BOS token, kept once) then
/// `body` twice, TransformerLens's induction test.
#[derive(Clone, Debug)]
pub struct GivenSequence {
    /// Tokens kept once before the repeated body (the BOS token, or none).
    pub prefix: Vec<u32>,
    /// The tokens repeated twice.
    pub body: Vec<u32>,
}

/// What [`analyse`] measures on.
#[derive(Clone, Debug)]
pub struct CircuitOptions {
    /// One given sequence, repeated, instead of `sequences` random ones (then `sequences` and `half`
    /// are unused).
    pub given: Option<GivenSequence>,
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
    /// The measured sequences: `prefix` tokens, then a half, then the same half again.
    pub seqs: Vec<Vec<u32>>,
    /// Length of each repeated half.
    pub half: usize,
    /// Tokens before the first half (the kept BOS of a given sequence; 0 for random ones).
    pub prefix: usize,
    /// Whether the sequence was given rather than random.
    pub given: bool,
    /// TransformerLens's `to_str_tokens` of a given sequence, when the model has a tokenizer.
    pub str_tokens: Option<Vec<String>>,
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

/// Mean per-head direct logit attribution to the correct next token over the repeated halves (rows
/// from `from_pos`).
fn mean_dla(model: &Model<'_>, seqs: &[Vec<u32>], from_pos: usize) -> Result<Vec<f64>> {
    let cfg = model.config();
    let mut sum = vec![0.0; cfg.n_layers * cfg.n_heads];
    let mut count = 0usize;
    for tokens in seqs {
        for row in direct_logit_attribution(model, tokens)?
            .iter()
            .skip(from_pos)
        {
            sum.iter_mut().zip(row).for_each(|(s, &x)| *s += x as f64);
            count += 1;
        }
    }
    Ok(sum.into_iter().map(|s| s / count.max(1) as f64).collect())
}

/// `g.prefix`, then `g.body` twice, checked against the model's vocabulary and context.
fn repeated(g: &GivenSequence, model: &Model<'_>) -> Result<Vec<u32>> {
    let cfg = model.config();
    ensure!(
        !g.body.is_empty(),
        "the given sequence has no token to repeat after its BOS token"
    );
    let len = g.prefix.len() + 2 * g.body.len();
    ensure!(
        len <= cfg.n_ctx,
        "the sequence of {} tokens repeated twice is {len} tokens, more than the model's context \
         n_ctx = {}: give at most {} tokens{}",
        g.prefix.len() + g.body.len(),
        cfg.n_ctx,
        g.prefix.len() + cfg.n_ctx.saturating_sub(g.prefix.len()) / 2,
        if g.prefix.is_empty() {
            ""
        } else {
            " (BOS included)"
        }
    );
    let seq: Vec<u32> = g
        .prefix
        .iter()
        .chain(&g.body)
        .chain(&g.body)
        .copied()
        .collect();
    check_vocab(model, &seq)?;
    Ok(seq)
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
    let (seqs, prefix, half) = match &args.given {
        Some(g) => (vec![repeated(g, model)?], g.prefix.len(), g.body.len()),
        None => {
            let half = args.half.unwrap_or((cfg.n_ctx / 2).min(32));
            ensure!(
                (1..=cfg.n_ctx / 2).contains(&half),
                "--half {half} is outside 1..={} (n_ctx / 2)",
                cfg.n_ctx / 2
            );
            check_sequences("--sequences", args.sequences, 2 * half)?;
            let seqs = repeated_random_tokens(cfg.d_vocab, half, args.sequences, args.seed);
            (seqs, 0, half)
        }
    };
    let from_pos = prefix + half;
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
        prefix,
        given: args.given.is_some(),
        str_tokens: None,
        scores: head_scores(model, &seqs)?,
        copying,
        ov_copying: heads(&cfg).map(|h| ov_copying_score(w.head(h))).collect(),
        dla: mean_dla(model, &seqs, from_pos)?,
        composition: CompositionMode::ALL.map(|m| all_composition_scores(&w, m)),
        baseline: composition_baseline(cfg.d_model, cfg.d_head, 200, args.seed),
        ablation: ablation_table(model, &seqs, from_pos)?,
        skip_trigrams,
        bigrams: json!({"top": bigram.top_entries(args.top, true), "bottom": bigram.top_entries(args.top, false)}),
        seqs,
    })
}
