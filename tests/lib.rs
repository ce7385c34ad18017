//! Shared helpers for the end-to-end tests: the TransformerLens fixtures and how to compare with them.

use std::path::PathBuf;

use serde::Deserialize;

include!("fixture_names.rs");

/// One token sequence and what TransformerLens computed for it.
#[derive(Debug, Deserialize)]
pub struct Case {
    /// Input tokens.
    pub tokens: Vec<u32>,
    /// `[pos][d_vocab_out]` log-probabilities.
    pub log_probs: Vec<Vec<f32>>,
    /// `[layer][head][query][key]` attention patterns (empty where a fixture records none).
    #[serde(default)]
    pub patterns: Vec<Vec<Vec<Vec<f32>>>>,
}

/// `expected.json` of a fixture.
#[derive(Debug, Deserialize)]
pub struct Expected {
    /// Fixture name.
    pub name: String,
    /// Versions of the reference.
    pub reference: String,
    /// Outputs of the unprocessed model.
    pub cases: Vec<Case>,
    /// Outputs of the model TransformerLens processed.
    pub processed_cases: Vec<Case>,
    /// Mean next-token loss per case.
    pub loss: Vec<f32>,
    /// Everything else (composition and copying scores), read by the tests that need it.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, serde_json::Value>,
}

/// The directory of fixture `name`.
pub fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// The checkpoint file of fixture `name`.
pub fn checkpoint(name: &str) -> PathBuf {
    fixture_dir(name).join("model.safetensors")
}

/// Reads `expected.json` of fixture `name`.
pub fn expected(name: &str) -> Expected {
    let path = fixture_dir(name).join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Largest `|a - b|` over two equally shaped nested sequences (panics on a shape mismatch).
pub fn max_abs_diff<'a>(
    a: impl IntoIterator<Item = &'a f32>,
    b: impl IntoIterator<Item = &'a f32>,
) -> f32 {
    let (a, b): (Vec<f32>, Vec<f32>) = (
        a.into_iter().copied().collect(),
        b.into_iter().copied().collect(),
    );
    assert_eq!(a.len(), b.len(), "shape mismatch");
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Seed of the held-out induction sequences (`microlens eval-induction`'s default): neither the training
/// data (seed 0) nor the training run's evaluation set.
pub const HELD_OUT_SEED: u64 = 4242;
/// Sequences per held-out suite (`microlens eval-induction`'s default).
pub const HELD_OUT_SEQS: usize = 512;

/// Scores `model` on each held-out suite (`microlens eval-induction`'s code and defaults) through the core
/// forward, prints the accuracy, and asserts each suite's minimum.
pub fn assert_held_out(
    model: &microlens::Model<'_>,
    goals: &[(microlens_host::train::heldout::Suite, f64)],
) {
    for &(suite, min) in goals {
        let s = microlens_host::train::heldout::score(model, suite, HELD_OUT_SEQS, HELD_OUT_SEED)
            .unwrap();
        println!(
            "{}: accuracy {:.4} (last-occurrence rule {:.4})",
            s.description, s.accuracy, s.last_occurrence
        );
        assert!(
            s.accuracy >= min,
            "{}: {} < {min}",
            s.description,
            s.accuracy
        );
    }
}
