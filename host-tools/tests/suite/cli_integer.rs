//! `microlens convert --arith integer`: the integer-only arithmetic as a user meets it, on the shipped
//! model, fixtures with an MLP and LLaMA-shaped ones, and its refusals.

use crate::binary::{convert_to, fixture, microlens, ok, one_line_error, s};
use std::path::{Path, PathBuf};

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../firmware-example/model/induction-2l.safetensors")
}

fn json(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(&microlens(args))).unwrap()
}

/// `microlens fidelity reference candidate --sequences 40 --json`.
fn fidelity(reference: &Path, candidate: &Path) -> serde_json::Value {
    json(&[
        "fidelity",
        s(reference),
        s(candidate),
        "--sequences",
        "40",
        "--json",
    ])
}

#[test]
fn the_shipped_model_in_integers_keeps_its_predictions_and_induction_heads() {
    let dir = tempfile::tempdir().unwrap();
    let f32_blob = convert_to(dir.path(), &shipped(), "shipped", "f32", &[]);
    let int = convert_to(
        dir.path(),
        &shipped(),
        "shipped",
        "i8",
        &["--arith", "integer"],
    );
    assert_eq!(
        json(&["inspect", s(&int), "--json"])["activations"],
        "integer"
    );
    let v = fidelity(&f32_blob, &int);
    assert_eq!(v["candidate"]["activations"], "integer");
    let (kl, repeated) = (
        v["mean_kl"].as_f64().unwrap(),
        v["top1_agreement_repeated"].as_f64().unwrap(),
    );
    assert!(
        kl < 1.5e-3 && repeated >= 0.995,
        "mean KL {kl}, repeated top-1 {repeated}"
    );
    for h in v["heads"].as_array().unwrap() {
        let (r, c) = (
            h["induction_score_ref"].as_f64().unwrap(),
            h["induction_score_cand"].as_f64().unwrap(),
        );
        assert!((r - c).abs() < 0.01, "{h}");
    }
    // The logits hash is the firmware's: the same run twice, and the cache's patterns are probabilities.
    let tokens = "5,9,2,7,5,9,2,7,5,9";
    let hash = |_: ()| ok(&microlens(&["run", s(&int), "--tokens", tokens, "--hash"]));
    assert_eq!(hash(()), hash(()));
    let cache = dir.path().join("cache.safetensors");
    ok(&microlens(&[
        "run",
        s(&int),
        "--tokens",
        tokens,
        "--cache",
        s(&cache),
        "--names",
        "hook_pattern",
    ]));
    let bytes = std::fs::read(&cache).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let p = st.tensor("blocks.1.attn.hook_pattern").unwrap();
    let values: Vec<f32> = p
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let n = tokens.split(',').count();
    for row in values.chunks_exact(n) {
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-3, "a pattern row sums to {sum}");
    }
}

#[test]
fn models_with_an_mlp_and_llama_shaped_models_run_in_integers() {
    let dir = tempfile::tempdir().unwrap();
    // GPT-2's shape; TransformerLens's and HF's LLaMA shapes (RMSNorm, rotary positions, a gated
    // SiLU MLP, grouped-query attention); shortformer positions.
    for name in ["gpt2_like", "llama_tl", "hf_llama", "shortformer"] {
        let ckpt = fixture(name).join("model.safetensors");
        let f32_blob = convert_to(dir.path(), &ckpt, name, "f32", &[]);
        let int = convert_to(dir.path(), &ckpt, name, "i8", &["--arith", "integer"]);
        let v = fidelity(&f32_blob, &int);
        let kl = v["mean_kl"].as_f64().unwrap();
        assert!(kl < 1.5e-3, "{name}: mean KL {kl}");
    }
}

#[test]
fn int4_matrices_in_integers_cost_about_what_w4a8_costs() {
    let dir = tempfile::tempdir().unwrap();
    let f32_blob = convert_to(dir.path(), &shipped(), "shipped", "f32", &[]);
    let w4a8 = convert_to(dir.path(), &shipped(), "shipped", "i4", &[]);
    let int = convert_to(
        dir.path(),
        &shipped(),
        "shipped-integer",
        "i4",
        &["--arith", "integer"],
    );
    let inspect = json(&["inspect", s(&int), "--json"]);
    assert_eq!(inspect["activations"], "integer", "{inspect}");
    let kl = |blob: &Path| fidelity(&f32_blob, blob)["mean_kl"].as_f64().unwrap();
    let (float, integer) = (kl(&w4a8), kl(&int));
    assert!(
        integer < 1.25 * float && integer < 8e-3,
        "int4 in integers: mean KL {integer}, in float (W4A8) {float}"
    );
    let hash = || {
        ok(&microlens(&[
            "run",
            s(&int),
            "--tokens",
            "5,9,2,7,5,9",
            "--hash",
        ]))
    };
    assert_eq!(hash(), hash());
    // LLaMA-shaped, from TransformerLens's checkpoint.
    let ckpt = fixture("llama_tl").join("model.safetensors");
    let f32_blob = convert_to(dir.path(), &ckpt, "llama_tl", "f32", &[]);
    let w4a8 = convert_to(dir.path(), &ckpt, "llama_tl", "i4", &[]);
    let integer = ["--arith", "integer"];
    let int = convert_to(dir.path(), &ckpt, "llama_tl-integer", "i4", &integer);
    let kl = |blob: &Path| fidelity(&f32_blob, blob)["mean_kl"].as_f64().unwrap();
    let (float, integer) = (kl(&w4a8), kl(&int));
    assert!(
        integer < 1.5 * float,
        "llama_tl int4 in integers: mean KL {integer}, in float (W4A8) {float}"
    );
}

#[test]
fn what_the_integer_arithmetic_does_not_take_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.mlb");
    let convert = |ckpt: &Path, extra: &[&str]| {
        let args = [
            &["convert", s(ckpt), "-o", s(&out), "--arith", "integer"],
            extra,
        ]
        .concat();
        microlens(&args)
    };
    one_line_error(
        &convert(&shipped(), &["--dtype", "f16"]),
        "--arith integer needs --dtype i8 or i4",
    );
    one_line_error(
        &convert(&shipped(), &["--dtype", "i8", "--no-fold-ln"]),
        "norms folded",
    );
    let sinusoidal = fixture("sinusoidal").join("model.safetensors");
    one_line_error(&convert(&sinusoidal, &["--dtype", "i8"]), "not sinusoidal");
    assert!(!out.exists(), "nothing written");
    let clash = microlens(&[
        "convert",
        s(&shipped()),
        "-o",
        s(&out),
        "--arith",
        "integer",
        "--activations",
        "i16",
    ]);
    assert!(!clash.status.success() && !out.exists());
}
