//! `microlens convert --dtype`, `inspect`'s per-dtype footprint and `microlens fidelity` as scripts use them.

use crate::binary::{convert_to, microlens, ok};
use std::path::{Path, PathBuf};
use std::process::Output;

fn convert(dir: &Path, name: &str, dtype: &str) -> PathBuf {
    let ckpt = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
        .join("model.safetensors");
    convert_to(dir, &ckpt, name, dtype, &[])
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).unwrap()
}

#[test]
fn every_dtype_converts_and_inspect_reports_its_footprint() {
    let dir = tempfile::tempdir().unwrap();
    let sizes: Vec<u64> = ["f32", "f16", "i8g", "i8", "i4"]
        .iter()
        .map(|d| {
            let blob = convert(dir.path(), "attn_only_2l", d);
            let s = json(&microlens(&["inspect", blob.to_str().unwrap(), "--json"]));
            let matrices: Vec<&str> = s["tensors"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["dtype"].as_str())
                .collect();
            assert!(matrices.contains(d), "{d}: {matrices:?}");
            let want_act = if d.starts_with('i') { "i8" } else { "f32" };
            assert_eq!(s["activations"], want_act);
            let as_dtype = s["as_dtype"].as_array().unwrap();
            let mine = as_dtype.iter().find(|f| f["dtype"] == *d).unwrap();
            assert_eq!(
                mine["flash_bytes"], s["flash_bytes"],
                "{d}: the footprint of its own dtype is its size"
            );
            assert_eq!(mine["kv_cache_bytes"], s["ram_bytes"]["kv_cache"]);
            s["flash_bytes"].as_u64().unwrap()
        })
        .collect();
    assert!(sizes.windows(2).all(|w| w[1] < w[0]), "{sizes:?}");
}

#[test]
fn fidelity_json_table_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let (f32_blob, i8_blob) = (
        convert(dir.path(), "gpt2_like", "f32"),
        convert(dir.path(), "gpt2_like", "i8"),
    );
    let (r, c) = (f32_blob.to_str().unwrap(), i8_blob.to_str().unwrap());

    let v = json(&microlens(&[
        "fidelity",
        r,
        c,
        "--sequences",
        "12",
        "--seed",
        "3",
        "--json",
    ]));
    for key in [
        "top1_agreement",
        "top1_flip_max_margin",
        "mean_kl",
        "max_kl",
        "logit_rmse",
        "loss_repeated_ref",
        "loss_repeated_cand",
    ] {
        assert!(v[key].is_number(), "{key}: {v}");
    }
    assert_eq!(v["sequences"], 12);
    assert_eq!(v["positions"], 12 * 16);
    let heads = v["heads"].as_array().unwrap();
    assert_eq!(heads.len(), 2 * 4);
    for key in [
        "layer",
        "head",
        "pattern_max_abs_diff",
        "pattern_mean_js",
        "induction_score_ref",
        "induction_score_cand",
        "prev_token_score_ref",
        "prev_token_score_cand",
        "copying_score_ref",
        "copying_score_cand",
    ] {
        assert!(
            heads.iter().all(|h| h[key].is_number()),
            "{key}: {}",
            heads[0]
        );
    }
    assert!(v["most_changed_head"]["layer"].is_number());
    assert_eq!(v["candidate"]["activations"], "i8");

    let same = json(&microlens(&[
        "fidelity",
        r,
        r,
        "--sequences",
        "5",
        "--json",
    ]));
    assert_eq!(
        (same["mean_kl"].as_f64(), same["top1_agreement"].as_f64()),
        (Some(0.0), Some(1.0))
    );

    let tokens = dir.path().join("tokens.txt");
    std::fs::write(&tokens, "1,2,3,1,2,3\n\n4, 5, 4, 5\n").unwrap();
    let plots = dir.path().join("plots");
    let table = ok(&microlens(&[
        "fidelity",
        r,
        c,
        "--tokens",
        tokens.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
    ]));
    assert!(table.contains("2 sequences, 10 positions"), "{table}");
    assert!(table.contains("most changed head: L"), "{table}");
    for png in ["heads.png", "composition.png"] {
        let bytes = std::fs::read(plots.join(png)).unwrap();
        assert_eq!(&bytes[1..4], b"PNG", "{png}");
    }
}

#[test]
fn fidelity_refuses_bad_inputs_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        convert(dir.path(), "gpt2_like", "f32"),
        convert(dir.path(), "attn_only_2l", "f32"),
    );
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let tokens = dir.path().join("bad.txt");
    std::fs::write(&tokens, "1,2,x\n").unwrap();
    for (args, mentions) in [
        (vec!["fidelity", a, b], "differ in shape"),
        (vec!["fidelity", a, a, "--seq-len", "17"], "--seq-len"),
        (
            vec!["fidelity", a, a, "--tokens", tokens.to_str().unwrap()],
            "bad.txt:1",
        ),
        (vec!["fidelity", a, "nope.mlb"], "nope.mlb"),
    ] {
        let o = microlens(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(mentions),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}

/// `fidelity BLOB BLOB` on 8 sequences with `extra` options, as JSON.
fn self_fidelity(blob: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["fidelity", blob, blob, "--sequences", "8", "--json"];
    args.extend_from_slice(extra);
    json(&microlens(&args))
}

#[test]
fn fidelity_emulates_int8_roundings_on_a_float_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let f32_blob = convert(dir.path(), "attn_only_2l", "f32");
    let blob = f32_blob.to_str().unwrap();
    let run = |extra: &[&str]| self_fidelity(blob, extra);
    let exact = run(&[]);
    assert_eq!(exact["mean_kl"], 0.0);
    assert_eq!(exact["candidate"]["emulated_int8"], serde_json::json!([]));
    let kl = |v: &serde_json::Value| v["mean_kl"].as_f64().unwrap();
    let keys = run(&["--emulate-int8", "keys"]);
    assert_eq!(
        keys["candidate"]["emulated_int8"],
        serde_json::json!(["keys"])
    );
    let all = run(&["--emulate-int8", "inputs,queries,keys,values"]);
    assert!(
        kl(&keys) > 0.0 && kl(&all) > kl(&keys),
        "{} {}",
        kl(&keys),
        kl(&all)
    );
    // Values only move the output, not the layer's own pattern; keys move the pattern.
    let max_dpattern = |v: &serde_json::Value| {
        v["heads"].as_array().unwrap()[0]["pattern_max_abs_diff"]
            .as_f64()
            .unwrap()
    };
    assert!(max_dpattern(&keys) > 0.0);
    assert_eq!(max_dpattern(&run(&["--emulate-int8", "values"])), 0.0);
    let bad = microlens(&["fidelity", blob, blob, "--emulate-int8", "weights"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values"));
}

#[test]
fn fidelity_emulates_integer_steps_on_a_float_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let f32_blob = convert(dir.path(), "attn_only_2l", "f32");
    let blob = f32_blob.to_str().unwrap();
    let run = |extra: &[&str]| self_fidelity(blob, extra);
    let kl = |v: &serde_json::Value| v["mean_kl"].as_f64().unwrap();
    let softmax = run(&["--emulate-integer", "softmax"]);
    assert_eq!(
        softmax["candidate"]["emulated_integer"],
        serde_json::json!(["softmax"])
    );
    // The integer softmax moves the patterns by about its Q11 scores' rounding, no more.
    let dpattern = softmax["pattern_max_abs_diff"].as_f64().unwrap();
    assert!(dpattern > 0.0 && dpattern < 2e-3, "{dpattern}");
    let both = run(&["--emulate-integer", "softmax,norm"]);
    assert!(
        kl(&softmax) > 0.0 && kl(&both) > 0.0 && kl(&both) < 1e-5,
        "{}",
        kl(&both)
    );
    let conflict = microlens(&[
        "fidelity",
        blob,
        blob,
        "--emulate-integer",
        "norm",
        "--emulate-int8",
        "keys",
    ]);
    assert!(!conflict.status.success());
    assert!(String::from_utf8_lossy(&conflict.stderr).contains("cannot be used with"));
}
