//! The shipped induction model (`firmware-example/model/induction-2l`): the loss TransformerLens computes
//! for it on a fixed batch (recorded by `tests/fixtures/gen_tl.py`), and its accuracy on the repeated
//! part, both through `microlens convert` and the core forward pass; the circuits that make it an
//! induction model.

use std::path::PathBuf;

use microlens::analysis::{Head, HeadPattern};
use microlens::Model;
use microlens_host::analysis::{
    ablation_table, all_composition_scores, composition_baseline, full_ov_copying_score,
    head_scores, CircuitWeights, CompositionMode,
};
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::eval::generate::greedy;
use microlens_host::eval::metrics::argmax;
use microlens_host::eval::run::{log_softmax, run_blob, run_model};
use microlens_host::eval::sequences::repeated_random_tokens;
use microlens_host::train::data::InductionData;
use microlens_host::train::eval::best_copier;
use microlens_host::train::heldout::Suite;
use microlens_host::train::trainer::rng;
use microlens_tests::{assert_held_out, HELD_OUT_SEED};
use serde::Deserialize;

#[derive(Deserialize)]
struct Shipped {
    tokens: Vec<Vec<u32>>,
    predictable_from: Vec<usize>,
    loss: f64,
}

fn shipped() -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let ckpt = root.join("../firmware-example/model/induction-2l.safetensors");
    convert(&ckpt, &ConvertOptions::default())
        .expect("shipped model converts")
        .blob
}

/// The first shipped model (trained on distinct-token segments, `fixtures/induction_2l_distinct`), a
/// trained checkpoint TransformerLens has run (`gen_tl.py`): the same loss through `microlens convert` and
/// the core forward, and its accuracy on the repeated part of distinct segments.
#[test]
fn loss_equals_transformerlens_and_accuracy_is_high() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let ckpt = root.join("fixtures/induction_2l_distinct/induction-2l.safetensors");
    let blob = convert(&ckpt, &ConvertOptions::default())
        .expect("the checkpoint converts")
        .blob;
    let text = std::fs::read_to_string(root.join("fixtures/shipped_induction_2l.json")).unwrap();
    let fx: Shipped = serde_json::from_str(&text).unwrap();
    let (mut loss, mut n) = (0.0f64, 0usize);
    let (mut correct, mut predictable) = (0usize, 0usize);
    for (tokens, &from) in fx.tokens.iter().zip(&fx.predictable_from) {
        let out = run_blob(&blob, tokens).unwrap();
        for (p, logits) in out.logits.iter().enumerate().take(tokens.len() - 1) {
            let next = tokens[p + 1] as usize;
            loss -= log_softmax(logits)[next] as f64;
            n += 1;
            if p >= from {
                correct += (argmax(logits) == next) as usize;
                predictable += 1;
            }
        }
    }
    let loss = loss / n as f64;
    let accuracy = correct as f64 / predictable as f64;
    println!(
        "loss {loss:.6} (TransformerLens {:.6}), accuracy on the repeated part {accuracy:.4}",
        fx.loss
    );
    assert!(
        (loss - fx.loss).abs() <= 1e-4,
        "loss {loss} vs TransformerLens {}",
        fx.loss
    );
    assert!(accuracy >= 0.95, "accuracy {accuracy}");
}

/// The induction test as TransformerLens users run it, on held-out sequences through the core forward:
/// Issue 14's goals, as written, on held-out sequences through the core forward (`microlens
/// eval-induction`'s code and defaults: 512 sequences each, seed 4242): >= 97% on `2 x 32` random tokens
/// drawn with replacement (TransformerLens's `generate_repeated_tokens`), >= 95% on a random prefix + a
/// segment drawn with replacement repeated (variable lengths), >= 99% on `2 x 32` distinct tokens.
#[test]
fn held_out_induction_tests_through_the_core_forward() {
    let blob = shipped();
    let model = Model::from_bytes(&blob).unwrap();
    assert_held_out(
        &model,
        &[
            (Suite::RepeatedWithReplacement, 0.97),
            (Suite::PrefixRepeatedWithReplacement, 0.95),
            (Suite::RepeatedDistinct, 0.99),
        ],
    );
}

/// `microlens generate`'s greedy decoding through the KV cache picks, at every step, the argmax a full
/// re-run of the whole sequence gives; on a repeated sequence it continues the repeat; past `n_ctx` it
/// refuses.
#[test]
fn greedy_generation_continues_a_repeat_and_equals_full_reruns() {
    let blob = shipped();
    let model = Model::from_bytes(&blob).unwrap();
    let n_ctx = model.config().n_ctx;
    let seq = &Suite::RepeatedDistinct
        .sequences(n_ctx, model.config().d_vocab, 1, HELD_OUT_SEED)
        .unwrap()[0];
    let prompt = &seq.tokens[..40];
    let new = greedy(&model, prompt, 24).unwrap();
    let all: Vec<u32> = prompt.iter().chain(&new).copied().collect();
    let out = run_model(&model, &all[..all.len() - 1]).unwrap();
    for (k, &t) in new.iter().enumerate() {
        assert_eq!(
            argmax(&out.logits[prompt.len() - 1 + k]),
            t as usize,
            "step {k}"
        );
    }
    let right = new
        .iter()
        .zip(&seq.tokens[40..])
        .filter(|(a, b)| a == b)
        .count();
    println!("continuation {new:?}: {right} of 24 equal the repeat");
    assert!(right >= 22, "{right} of 24");
    assert!(greedy(&model, prompt, n_ctx + 2 - prompt.len()).is_err());
}

/// The shipped model on held-out sequences of the training distribution (random prefix, random segment
/// repeated, so the offset varies) through the core forward: accuracy on the repeated part.
#[test]
fn accuracy_at_varying_offsets_through_the_core_forward() {
    let blob = shipped();
    let model = Model::from_bytes(&blob).unwrap();
    let cfg = model.config();
    let data = InductionData::new(cfg.n_ctx, cfg.d_vocab).unwrap();
    let seqs = data.sample_many(&mut rng(HELD_OUT_SEED, 0), 256);
    let (mut correct, mut predictable) = (0usize, 0usize);
    for s in &seqs {
        let out = run_model(&model, &s.tokens).unwrap();
        for i in (0..s.tokens.len()).filter(|&i| s.is_predictable(i)) {
            correct += usize::from(argmax(&out.logits[i]) == s.tokens[i + 1] as usize);
            predictable += 1;
        }
    }
    let accuracy = correct as f64 / predictable as f64;
    let (distance, copier) = best_copier(&seqs, cfg.n_ctx / 2);
    println!("accuracy on the repeated part {accuracy:.4}; best fixed-distance copier ({distance}) {copier:.4}");
    assert!(accuracy >= 0.95, "accuracy {accuracy}");
    assert!(
        copier < 0.2,
        "the data must defeat a fixed-distance copier ({copier})"
    );
}

/// The evidence of docs/circuits.md, from the analyses `microlens circuits` prints: a layer-0 previous-token head, a
/// layer-1 induction head that K-composes with it (well above its Q/V composition and the random
/// baseline) and copies (full OV circuit eigenvalues positive), and the ablation table.
#[test]
fn circuits_show_a_previous_token_head_and_an_induction_head() {
    let blob = shipped();
    let model = Model::from_bytes(&blob).unwrap();
    let cfg = *model.config();
    let seqs = repeated_random_tokens(cfg.d_vocab, 32, 16, 0);
    let scores = head_scores(&model, &seqs).unwrap();
    let best = |layer: usize, f: &dyn Fn(Head) -> f64| {
        (0..cfg.n_heads)
            .map(|h| Head::new(layer, h))
            .max_by(|&a, &b| f(a).total_cmp(&f(b)))
            .unwrap()
    };
    let prev = best(0, &|h| scores.get(HeadPattern::PreviousToken, h));
    let ind = best(1, &|h| scores.induction_repeated[h.index(cfg.n_heads)]);
    let prev_score = scores.get(HeadPattern::PreviousToken, prev);
    let ind_score = scores.induction_repeated[ind.index(cfg.n_heads)];
    let ind_mul = scores.get(HeadPattern::Induction, ind);
    println!("previous-token head {prev} {prev_score:.3}; induction head {ind} {ind_score:.3} (TL mul {ind_mul:.3})");
    assert!(prev_score >= 0.6, "previous-token score {prev_score}");
    assert!(
        ind_score >= 0.7,
        "induction score on the repeated half {ind_score}"
    );
    // TransformerLens's "mul" counts the first half too, where no head can score: at most about 1/2 here.
    assert!(
        (0.35..=0.5).contains(&ind_mul),
        "TL induction score {ind_mul}"
    );
    // No layer-0 head can be an induction head (it has no previous-token information to key on).
    for h in 0..cfg.n_heads {
        let s = scores.induction_repeated[Head::new(0, h).index(cfg.n_heads)];
        assert!(s < 0.1, "layer-0 head {h} induction score {s}");
    }

    let w = CircuitWeights::from_model(&model).unwrap();
    let [q, k, v] = CompositionMode::ALL.map(|m| all_composition_scores(&w, m).get(prev, ind));
    let base = composition_baseline(cfg.d_model, cfg.d_head, 200, 0);
    println!(
        "composition {prev} -> {ind}: Q {q:.3} K {k:.3} V {v:.3}; baseline {:.3} ± {:.3}",
        base.mean, base.std
    );
    assert!(
        k > base.mean + 5.0 * base.std,
        "K-composition {k} vs baseline {base:?}"
    );
    // Measured: K 0.258 against Q 0.102 and V 0.114, both below the baseline's mean.
    assert!(k > 2.0 * q.max(v), "K {k} vs Q {q}, V {v}");
    assert!(
        q.max(v) < base.mean + 3.0 * base.std,
        "Q {q}, V {v} vs {base:?}"
    );

    let copying = full_ov_copying_score(&w.w_e, w.head(ind), &w.w_u);
    println!("full OV copying score of {ind}: {copying:.3}");
    assert!(copying > 0.9, "copying score {copying}");

    let table = ablation_table(&model, &seqs, 32).unwrap();
    let [direct, layer0, full] = [table.by_layers[0], table.by_layers[1], table.by_layers[2]];
    println!("ablation: direct {direct:.3}, with layer 0 {layer0:.3}, full {full:.3}");
    assert!(direct > 3.5 && layer0 > 3.5, "{table:?}");
    assert!(full < 0.5, "{table:?}");
}
