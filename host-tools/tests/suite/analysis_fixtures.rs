//! Composition and copying scores against TransformerLens 2.18's on the fixtures: the processed blob
//! against TransformerLens's processed model, the unprocessed blob against the unprocessed one (the
//! LLaMA fixtures too: a head's `W_K`/`W_V` are its key/value head's, as TransformerLens repeats them).

use crate::common;

use microlens::Model;
use microlens_host::analysis::{
    all_composition_scores, full_ov_copying_score, ov_copying_score, CircuitWeights,
    CompositionMode,
};

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "shape");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn composition_scores_match_transformer_lens() {
    for name in common::FIXTURES.into_iter().chain(common::LLAMA_FIXTURES) {
        let expected = common::expected(name);
        for (processed, key) in [(false, "unprocessed"), (true, "processed")] {
            let blob = common::blob(name, processed);
            let w = CircuitWeights::from_model(&Model::from_bytes(&blob).unwrap()).unwrap();
            for mode in CompositionMode::ALL {
                let ours = all_composition_scores(&w, mode).values;
                let theirs = common::flat(&expected["composition_scores"][key][mode.name()]);
                let d = max_diff(&ours, &theirs);
                println!("{name:24} {key:11} {}: max |diff| {d:.2e}", mode.name());
                assert!(d < 1e-4, "{name} {key} {}: {d}", mode.name());
            }
        }
    }
}

#[test]
fn copying_scores_match_transformer_lens() {
    for name in common::FIXTURES.into_iter().chain(common::LLAMA_FIXTURES) {
        let expected = common::expected(name);
        for (processed, key) in [(false, "unprocessed"), (true, "processed")] {
            let blob = common::blob(name, processed);
            let w = CircuitWeights::from_model(&Model::from_bytes(&blob).unwrap()).unwrap();
            let ov: Vec<f64> = w.all_heads().map(|h| ov_copying_score(w.head(h))).collect();
            let full: Vec<f64> = w
                .all_heads()
                .map(|h| full_ov_copying_score(&w.w_e, w.head(h), &w.w_u))
                .collect();
            let (d_ov, d_full) = (
                max_diff(&ov, &common::flat(&expected["copying_scores"][key]["ov"])),
                max_diff(
                    &full,
                    &common::flat(&expected["copying_scores"][key]["full"]),
                ),
            );
            println!("{name:24} {key:11} copying: ov {d_ov:.2e}, full {d_full:.2e}");
            assert!(
                d_ov < 1e-4 && d_full < 1e-4,
                "{name} {key}: {d_ov} {d_full}"
            );
        }
    }
}
