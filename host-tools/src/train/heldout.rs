//! The held-out induction tests as a TransformerLens user runs them, through the core crate's forward pass
//! on a converted blob (`microlens eval-induction`).
//!
//! Each suite scores the next-token predictions of the repeated part: positions `i >= p + L` (the current
//! token is the first of the second copy or later) whose target `tokens[i + 1]` exists. For `2 x 32` that is
//! the 31 predictions of tokens 33..63, every token of the second copy after its first.

use anyhow::{ensure, Result};
use microlens::Model;
use serde::Serialize;

use super::data::{repeated_twice, Draw, InductionData};
use super::phrases;
use super::sequence::Sequence;
use super::trainer::rng;
use crate::eval::metrics::{argmax, log_softmax};
use crate::eval::run::run_with_hooks;

/// One held-out test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Suite {
    /// TransformerLens's `generate_repeated_tokens`: `n_ctx / 2` tokens drawn with replacement, then the same
    /// again.
    RepeatedWithReplacement,
    /// A random prefix, then a segment drawn with replacement repeated to fill the context; prefix and
    /// segment lengths vary.
    PrefixRepeatedWithReplacement,
    /// `n_ctx / 2` distinct tokens, then the same again.
    RepeatedDistinct,
    /// English phrases (bytes) repeated after an English prefix (byte models only).
    RepeatedPhrases,
}

impl Suite {
    /// The token suites, for every model.
    pub const TOKENS: [Suite; 3] = [
        Suite::RepeatedWithReplacement,
        Suite::PrefixRepeatedWithReplacement,
        Suite::RepeatedDistinct,
    ];

    /// The suites that apply to a model with this vocabulary (the phrases for 256-token byte models).
    pub fn for_vocab(d_vocab: usize) -> Vec<Suite> {
        let mut out = Self::TOKENS.to_vec();
        if d_vocab == 256 {
            out.push(Suite::RepeatedPhrases);
        }
        out
    }

    /// A one-line description.
    pub fn describe(self, n_ctx: usize) -> String {
        let half = n_ctx / 2;
        match self {
            Suite::RepeatedWithReplacement => format!("2 x {half} random tokens, with replacement"),
            Suite::PrefixRepeatedWithReplacement => {
                "random prefix + repeated segment, with replacement, variable lengths".to_string()
            }
            Suite::RepeatedDistinct => format!("2 x {half} distinct random tokens"),
            Suite::RepeatedPhrases => {
                "English prefix + repeated English phrase (bytes)".to_string()
            }
        }
    }

    /// `n` held-out sequences of this suite for a model of context `n_ctx` and vocabulary `d_vocab`, from
    /// `seed` (each suite its own stream).
    pub fn sequences(
        self,
        n_ctx: usize,
        d_vocab: usize,
        n: usize,
        seed: u64,
    ) -> Result<Vec<Sequence>> {
        ensure!(
            n_ctx >= 8,
            "n_ctx {n_ctx} is too short for the induction tests"
        );
        let half = n_ctx / 2;
        let mut r = rng(seed, 100 + self as u64);
        Ok(match self {
            Suite::RepeatedWithReplacement => (0..n)
                .map(|_| repeated_twice(&mut r, half, d_vocab, Draw::Replacement))
                .collect(),
            Suite::PrefixRepeatedWithReplacement => {
                InductionData::with_draw(n_ctx, d_vocab, Draw::Replacement)?.sample_many(&mut r, n)
            }
            Suite::RepeatedDistinct => {
                ensure!(
                    d_vocab >= half,
                    "d_vocab {d_vocab} < {half}: no distinct test"
                );
                (0..n)
                    .map(|_| repeated_twice(&mut r, half, d_vocab, Draw::Distinct))
                    .collect()
            }
            Suite::RepeatedPhrases => {
                ensure!(
                    d_vocab == 256,
                    "the phrase test needs a byte model (d_vocab 256)"
                );
                (0..n)
                    .map(|_| phrases::repeated_phrase(&mut r, n_ctx, phrases::HELD_OUT))
                    .collect()
            }
        })
    }
}

/// A model's score on one suite.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SuiteScore {
    /// Which test.
    pub suite: Suite,
    /// Its description.
    pub description: String,
    /// Number of sequences.
    pub sequences: usize,
    /// Number of scored predictions.
    pub predictions: usize,
    /// Top-1 accuracy on them.
    pub accuracy: f64,
    /// Mean cross-entropy on them (nats).
    pub loss: f64,
    /// Accuracy of the naive rule "copy what followed the last earlier occurrence of the current token".
    pub last_occurrence: f64,
}

/// Top-1 hits and summed loss of `model` on the repeated part of `seqs`, through the core forward pass
/// (sequences split over the available cores; the sums are added in a fixed order).
fn hits_and_loss(model: &Model<'_>, seqs: &[Sequence]) -> Result<(usize, f64, usize)> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = seqs.len().div_ceil(threads).max(1);
    let parts: Vec<Result<(usize, f64, usize)>> = std::thread::scope(|s| {
        let handles: Vec<_> = seqs
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    let (mut hits, mut loss, mut n) = (0usize, 0f64, 0usize);
                    for seq in part {
                        let logits = run_with_hooks(model, &seq.tokens, &mut ())?;
                        for i in (0..seq.tokens.len()).filter(|&i| seq.is_predictable(i)) {
                            let target = seq.tokens[i + 1] as usize;
                            hits += usize::from(argmax(&logits[i]) == target);
                            loss -= log_softmax(&logits[i])[target];
                            n += 1;
                        }
                    }
                    Ok((hits, loss, n))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("evaluation thread panicked"))
            .collect()
    });
    parts.into_iter().try_fold((0, 0.0, 0), |acc, p| {
        let p = p?;
        Ok((acc.0 + p.0, acc.1 + p.1, acc.2 + p.2))
    })
}

/// Accuracy on the repeated part of the rule "predict the token that followed the last earlier occurrence
/// of the current token" (wrong when there is none).
pub fn last_occurrence_accuracy(seqs: &[Sequence]) -> f64 {
    let (mut hits, mut n) = (0usize, 0usize);
    for s in seqs {
        for i in (0..s.tokens.len()).filter(|&i| s.is_predictable(i)) {
            n += 1;
            let prev = (0..i).rev().find(|&j| s.tokens[j] == s.tokens[i]);
            hits += usize::from(prev.is_some_and(|j| s.tokens[j + 1] == s.tokens[i + 1]));
        }
    }
    hits as f64 / n.max(1) as f64
}

/// Scores `model` on `suite` with `n` sequences from `seed`.
pub fn score(model: &Model<'_>, suite: Suite, n: usize, seed: u64) -> Result<SuiteScore> {
    let cfg = model.config();
    let seqs = suite.sequences(cfg.n_ctx, cfg.d_vocab, n, seed)?;
    let (hits, loss, predictions) = hits_and_loss(model, &seqs)?;
    Ok(SuiteScore {
        suite,
        description: suite.describe(cfg.n_ctx),
        sequences: seqs.len(),
        predictions,
        accuracy: hits as f64 / predictions.max(1) as f64,
        loss: loss / predictions.max(1) as f64,
        last_occurrence: last_occurrence_accuracy(&seqs),
    })
}

/// Scores `model` on every suite that applies to it.
pub fn score_all(model: &Model<'_>, n: usize, seed: u64) -> Result<Vec<SuiteScore>> {
    Suite::for_vocab(model.config().d_vocab)
        .into_iter()
        .map(|s| score(model, s, n, seed))
        .collect()
}
