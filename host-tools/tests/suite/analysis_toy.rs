//! The hand-built induction model: the detectors, composition scores, copying scores, ablation table,
//! attribution and patching must find exactly the heads it was built with.

use crate::toy;

use microlens::analysis::{Head, HeadPattern};
use microlens::Model;
use microlens_host::analysis::{
    ablation_table, activation_patching, all_composition_scores, composition_baseline,
    direct_logit_attribution, full_ov_copying_score, head_scores, logit_diff_attribution,
    CircuitWeights, CompositionMode,
};
use microlens_host::eval::sequences::repeated_random_tokens;
use toy::{induction_toy_model, TOY_INDUCTION_HEAD, TOY_PREVIOUS_TOKEN_HEAD, TOY_VOCAB};

fn heads() -> Vec<Head> {
    (0..2)
        .flat_map(|l| (0..2).map(move |h| Head::new(l, h)))
        .collect()
}

#[test]
fn detectors_find_the_designed_heads() {
    let blob = induction_toy_model().unwrap();
    let model = Model::from_bytes(&blob).unwrap();
    let seqs = repeated_random_tokens(TOY_VOCAB, TOY_VOCAB, 8, 1);
    assert_eq!(seqs[0].len(), 2 * TOY_VOCAB);
    let s = head_scores(&model, &seqs).unwrap();
    for h in heads() {
        println!(
            "{h}: prev {:.3} dup {:.3} ind {:.3}",
            s.get(HeadPattern::PreviousToken, h),
            s.get(HeadPattern::DuplicateToken, h),
            s.get(HeadPattern::Induction, h)
        );
    }
    // Previous token: every row but row 0 (which can only attend to itself) -> (T - 1) / T.
    let t = seqs[0].len() as f64;
    assert!(s.get(HeadPattern::PreviousToken, TOY_PREVIOUS_TOKEN_HEAD) > 0.99 * (t - 1.0) / t);
    // Induction: the second half of the rows (the first half has no target) -> about 1/2.
    assert!(s.get(HeadPattern::Induction, TOY_INDUCTION_HEAD) > 0.45);
    for h in heads() {
        if h != TOY_PREVIOUS_TOKEN_HEAD {
            assert!(s.get(HeadPattern::PreviousToken, h) < 0.3, "{h}");
        }
        if h != TOY_INDUCTION_HEAD {
            assert!(s.get(HeadPattern::Induction, h) < 0.15, "{h}");
        }
        assert!(s.get(HeadPattern::DuplicateToken, h) < 0.15, "{h}");
    }
}

#[test]
fn composition_finds_k_composition_of_the_pair() {
    let blob = induction_toy_model().unwrap();
    let w = CircuitWeights::from_model(&Model::from_bytes(&blob).unwrap()).unwrap();
    let baseline = composition_baseline(w.config.d_model, w.config.d_head, 200, 3);
    let k = all_composition_scores(&w, CompositionMode::K);
    let pair = k.get(TOY_PREVIOUS_TOKEN_HEAD, TOY_INDUCTION_HEAD);
    println!(
        "K-composition L0H0 -> L1H0 {pair:.4}, random baseline {:.4} ± {:.4}",
        baseline.mean, baseline.std
    );
    // The designed OV (tok -> prev) times W_K W_Q^T (prev -> tok) is an identity on d_vocab dims.
    assert!((pair - 1.0 / (TOY_VOCAB as f64).sqrt()).abs() < 0.02);
    assert!(pair > baseline.mean + 5.0 * baseline.std);
    for mode in CompositionMode::ALL {
        let scores = all_composition_scores(&w, mode);
        for from in heads().into_iter().filter(|h| h.layer == 0) {
            for to in heads().into_iter().filter(|h| h.layer == 1) {
                let s = scores.get(from, to);
                println!("{} {from} -> {to}: {s:.4}", mode.name());
                if (mode, from, to)
                    != (
                        CompositionMode::K,
                        TOY_PREVIOUS_TOKEN_HEAD,
                        TOY_INDUCTION_HEAD,
                    )
                {
                    assert!(s < pair / 2.0, "{} {from} -> {to}: {s}", mode.name());
                }
            }
        }
        // Nothing composes with a head in the same or an earlier layer.
        assert_eq!(scores.get(TOY_INDUCTION_HEAD, TOY_PREVIOUS_TOKEN_HEAD), 0.0);
    }
}

#[test]
fn the_induction_head_copies_and_the_ablation_table_shows_the_circuit() {
    let blob = induction_toy_model().unwrap();
    let model = Model::from_bytes(&blob).unwrap();
    let w = CircuitWeights::from_model(&model).unwrap();
    let copying = |h| full_ov_copying_score(&w.w_e, w.head(h), &w.w_u);
    assert!((copying(TOY_INDUCTION_HEAD) - 1.0).abs() < 1e-3);
    assert!(copying(TOY_PREVIOUS_TOKEN_HEAD).abs() < 1e-6);

    let seqs = repeated_random_tokens(TOY_VOCAB, TOY_VOCAB, 4, 2);
    // The loss of the repeated half, as TransformerLens's induction_loss.
    let table = ablation_table(&model, &seqs, TOY_VOCAB).unwrap();
    println!("{table:?}");
    let uniform = (TOY_VOCAB as f64).ln();
    let [direct, layer0, full] = table.by_layers[..] else {
        panic!("2 layers")
    };
    assert!((direct - uniform).abs() < 0.05, "direct path only {direct}");
    assert!((layer0 - uniform).abs() < 0.05, "with layer 0 {layer0}");
    assert!(full < 0.1, "full model {full}");
    for h in heads() {
        let loss = table.per_head[h.index(2)];
        if h == TOY_PREVIOUS_TOKEN_HEAD || h == TOY_INDUCTION_HEAD {
            assert!(loss > full + 1.0, "{h} ablated: {loss}");
        } else {
            assert!((loss - full).abs() < 0.1, "{h} ablated: {loss}");
        }
    }
}

#[test]
fn attribution_and_patching_point_at_the_induction_head() {
    let blob = induction_toy_model().unwrap();
    let model = Model::from_bytes(&blob).unwrap();
    let clean: Vec<u32> = vec![3, 8, 1, 5, 3, 8, 1];
    // The corrupted sequence changes what followed the first 1; the answer is the clean one.
    let mut corrupt = clean.clone();
    corrupt[3] = 9;
    let dla = direct_logit_attribution(&model, &clean).unwrap();
    let last = dla.last().unwrap();
    println!("DLA at the last position: {last:?}");
    assert!(last[TOY_INDUCTION_HEAD.index(2)] > 5.0);
    for h in heads().into_iter().filter(|&h| h != TOY_INDUCTION_HEAD) {
        assert!(last[h.index(2)].abs() < 0.5);
    }

    let diff = logit_diff_attribution(&model, &clean, 5, 9).unwrap();
    assert!(diff[TOY_INDUCTION_HEAD.index(2)] > 9.0, "{diff:?}");

    let p = activation_patching(&model, &clean, &corrupt, 5, 9).unwrap();
    println!("clean {:.3} corrupt {:.3}", p.clean, p.corrupt);
    assert!(p.clean > 5.0 && p.corrupt < -5.0);
    // The corrupted position carries everything at layer 0; nothing else does.
    for (pos, &x) in p.resid_pre[0].iter().enumerate() {
        let n = p.normalized(x);
        if pos == 3 {
            assert!((n - 1.0).abs() < 1e-3, "pos 3: {n}");
        } else {
            assert!(n.abs() < 1e-3, "pos {pos}: {n}");
        }
    }
    // At layer 1 the induction head reads the answer from that position's values; the key of position 4
    // (previous token 5 or 9) does not matter to the final query (token 1).
    assert!((p.normalized(p.resid_pre[1][3]) - 1.0).abs() < 0.05);
    assert!(p.normalized(p.resid_pre[1][4]).abs() < 0.05);
    // Head outputs: the induction head restores the answer, the distractors do not.
    assert!(p.normalized(p.head_out[1][0]) > 0.9);
    assert!(
        p.normalized(p.head_out[0][1]).abs() < 0.1 && p.normalized(p.head_out[1][1]).abs() < 0.1
    );
}
