//! Checkpoint -> blob -> forward, against what TransformerLens 2.18 computed for the same checkpoints.
//!
//! Thresholds from the foundation issue: log-probs within 1e-4, attention patterns within 1e-5.

use microlens::{Activations, DType};
use microlens_host::convert::fold::ProcessingOptions;
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::eval::run::{log_softmax, run_blob};
use microlens_tests::{
    checkpoint, expected, fixture_dir, max_abs_diff, Case, FIXTURES, LLAMA_FIXTURES,
};

const LOG_PROB_TOL: f32 = 1e-4;
const PATTERN_TOL: f32 = 1e-5;

fn blob(name: &str, processing: ProcessingOptions) -> Vec<u8> {
    let opts = ConvertOptions {
        config: None,
        dtype: DType::F32,
        processing,
        rounding: None,
        activations: None,
        tables: None,
    };
    convert(&checkpoint(name), &opts)
        .unwrap_or_else(|e| panic!("{name}: {e:#}"))
        .blob
}

/// Max log-prob and pattern differences of `blob` over `cases`.
fn diffs(blob: &[u8], cases: &[Case]) -> (f32, f32) {
    let (mut lp, mut pat) = (0.0f32, 0.0f32);
    for case in cases {
        let out = run_blob(blob, &case.tokens).unwrap();
        let ours: Vec<Vec<f32>> = out.logits.iter().map(|l| log_softmax(l)).collect();
        lp = lp.max(max_abs_diff(
            ours.iter().flatten(),
            case.log_probs.iter().flatten(),
        ));
        let flat = |p: &Vec<Vec<Vec<Vec<f32>>>>| {
            p.iter()
                .flatten()
                .flatten()
                .flatten()
                .copied()
                .collect::<Vec<_>>()
        };
        pat = pat.max(max_abs_diff(&flat(&out.patterns), &flat(&case.patterns)));
    }
    (lp, pat)
}

#[test]
fn every_fixture_matches_transformerlens_with_processing_on_and_off() {
    for name in FIXTURES.into_iter().chain(LLAMA_FIXTURES) {
        let exp = expected(name);
        for (label, processing) in [
            ("processed", ProcessingOptions::default()),
            ("unprocessed", ProcessingOptions::none()),
        ] {
            let b = blob(name, processing);
            for (against, cases) in [
                ("cases", &exp.cases),
                ("processed_cases", &exp.processed_cases),
            ] {
                let (lp, pat) = diffs(&b, cases);
                println!(
                    "{name:24} {label:11} vs {against:15} log-prob {lp:.2e} pattern {pat:.2e}"
                );
                assert!(
                    lp <= LOG_PROB_TOL,
                    "{name} {label} vs {against}: log-prob diff {lp}"
                );
                assert!(
                    pat <= PATTERN_TOL,
                    "{name} {label} vs {against}: pattern diff {pat}"
                );
            }
        }
    }
}

#[test]
fn losses_match_transformerlens() {
    for name in FIXTURES.into_iter().chain(LLAMA_FIXTURES) {
        let exp = expected(name);
        let b = blob(name, ProcessingOptions::default());
        for (case, &tl_loss) in exp.cases.iter().zip(&exp.loss) {
            let out = run_blob(&b, &case.tokens).unwrap();
            let n = case.tokens.len() - 1;
            let loss = (0..n)
                .map(|p| -log_softmax(&out.logits[p])[case.tokens[p + 1] as usize] as f64)
                .sum::<f64>()
                / n as f64;
            assert!(
                (loss as f32 - tl_loss).abs() <= 1e-4,
                "{name}: loss {loss} vs TransformerLens {tl_loss}"
            );
        }
    }
}

#[test]
fn folded_and_unfolded_blobs_agree_flag_by_flag() {
    let all_on = ProcessingOptions::default();
    let variants = [
        ProcessingOptions {
            fold_ln: false,
            ..all_on
        },
        ProcessingOptions {
            center_writing_weights: false,
            ..all_on
        },
        ProcessingOptions {
            center_unembed: false,
            ..all_on
        },
        ProcessingOptions {
            fold_value_biases: false,
            ..all_on
        },
        ProcessingOptions::none(),
    ];
    for name in [
        "attn_only_2l",
        "gpt2_like",
        "shortformer",
        "rotary_rms",
        "llama_tl",
    ] {
        let tokens = &expected(name).cases[0].tokens;
        let reference = run_blob(&blob(name, all_on), tokens).unwrap();
        for v in variants {
            let out = run_blob(&blob(name, v), tokens).unwrap();
            for (a, b) in out.logits.iter().zip(&reference.logits) {
                let d = max_abs_diff(&log_softmax(a), &log_softmax(b));
                assert!(d <= 1e-5, "{name} {v:?}: log-prob diff {d}");
            }
        }
    }
}

/// The LLaMA-family fixtures in every storage type and activation arithmetic: each runs (gated MLP,
/// key/value heads through the integer KV caches) and stays within its rounding's reach of
/// TransformerLens: bounds about twice the measured differences, which are 1.5 to 2.5 times those of
/// `rotary_rms` and `gpt2_like` in the same storage types (two rounded matrices multiply in the gate).
#[test]
fn llama_fixtures_run_in_every_dtype() {
    let runs = [
        (DType::F16, Activations::F32, 6e-3),
        (DType::I8, Activations::I8, 0.37),
        (DType::I8, Activations::I16, 0.19),
        (DType::I8, Activations::I16Kv16, 0.19),
        (DType::I8G, Activations::I16, 0.16),
        (DType::I4, Activations::I8, 2.5),
    ];
    for name in LLAMA_FIXTURES {
        let exp = expected(name);
        for (dtype, activations, bound) in runs {
            let opts = ConvertOptions {
                dtype,
                activations: Some(activations),
                ..ConvertOptions::default()
            };
            let b = convert(&checkpoint(name), &opts)
                .unwrap_or_else(|e| panic!("{name}: {e:#}"))
                .blob;
            let mut lp = 0.0f32;
            for case in &exp.cases {
                let out = run_blob(&b, &case.tokens).unwrap();
                let ours: Vec<Vec<f32>> = out.logits.iter().map(|l| log_softmax(l)).collect();
                lp = lp.max(max_abs_diff(
                    ours.iter().flatten(),
                    case.log_probs.iter().flatten(),
                ));
            }
            println!("{name:9} {dtype:?} {activations:?}: log-prob diff {lp:.3e} (bound {bound})");
            assert!(
                lp <= bound,
                "{name} {dtype:?} {activations:?}: {lp} > {bound}"
            );
        }
    }
}

/// llama2.c's three layouts of the `hf_llama` weights: the float ones give transformers' outputs, the
/// `Q8_0` one the outputs of its dequantised weights.
#[test]
fn llama2c_checkpoints_match_transformers() {
    let exp = expected("hf_llama");
    // `q80_cases` record log-probs only.
    let q80: Vec<Case> = serde_json::from_value(exp.rest["q80_cases"].clone()).unwrap();
    for version in 0..3 {
        let path = fixture_dir("hf_llama").join(format!("llama2c_v{version}.bin"));
        for (label, processing) in [
            ("processed", ProcessingOptions::default()),
            ("unprocessed", ProcessingOptions::none()),
        ] {
            let opts = ConvertOptions {
                processing,
                ..ConvertOptions::default()
            };
            let b = convert(&path, &opts).unwrap().blob;
            let cases = if version == 2 { &q80 } else { &exp.cases };
            let (mut lp, mut pat) = (0.0f32, 0.0f32);
            for case in cases {
                let out = run_blob(&b, &case.tokens).unwrap();
                let ours: Vec<Vec<f32>> = out.logits.iter().map(|l| log_softmax(l)).collect();
                lp = lp.max(max_abs_diff(
                    ours.iter().flatten(),
                    case.log_probs.iter().flatten(),
                ));
                if !case.patterns.is_empty() {
                    let ours = out.patterns.iter().flatten().flatten().flatten();
                    let theirs = case.patterns.iter().flatten().flatten().flatten();
                    pat = pat.max(max_abs_diff(ours, theirs));
                }
            }
            println!("llama2c_v{version} {label:11} log-prob {lp:.2e} pattern {pat:.2e}");
            assert!(lp <= LOG_PROB_TOL, "v{version} {label}: log-prob diff {lp}");
            assert!(pat <= PATTERN_TOL, "v{version} {label}: pattern diff {pat}");
        }
    }
}

#[test]
fn pth_and_safetensors_checkpoints_give_the_same_blob() {
    let opts = ConvertOptions {
        config: None,
        dtype: DType::F32,
        processing: ProcessingOptions::default(),
        rounding: None,
        activations: None,
        tables: None,
    };
    let from_pth = convert(&fixture_dir("attn_only_2l").join("model.pth"), &opts)
        .unwrap()
        .blob;
    assert_eq!(from_pth, blob("attn_only_2l", ProcessingOptions::default()));
}
