//! `microlens circuits`, `microlens patch` and `microlens run --cache` on the hand-built induction model,
//! through the binary.

use crate::toy;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use toy::induction_toy_model;

fn microlens(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_microlens"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn toy(dir: &Path) -> String {
    let path = dir.join("toy.mlb");
    std::fs::write(&path, induction_toy_model().unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn circuits_json_names_the_induction_circuit_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let model = toy(dir.path());
    let plots = dir.path().join("plots");
    let v: Value = serde_json::from_str(&microlens(&[
        "circuits",
        &model,
        "--json",
        "--plot",
        plots.to_str().unwrap(),
    ]))
    .unwrap();
    let heads = v["heads"].as_array().unwrap();
    assert_eq!(heads.len(), 4);
    let best = |key: &str| {
        let h = heads
            .iter()
            .max_by(|a, b| {
                a[key]
                    .as_f64()
                    .unwrap()
                    .total_cmp(&b[key].as_f64().unwrap())
            })
            .unwrap();
        (h["layer"].as_u64().unwrap(), h["head"].as_u64().unwrap())
    };
    assert_eq!(best("prev_token_score"), (0, 0));
    assert_eq!(best("induction_score"), (1, 0));
    assert_eq!(best("copying_score"), (1, 0));
    let comp = v["composition"].as_array().unwrap();
    assert_eq!(comp.len(), 4);
    let k_best = comp
        .iter()
        .max_by(|a, b| {
            a["k"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["k"].as_f64().unwrap())
        })
        .unwrap();
    assert_eq!(
        [
            &k_best["from_layer"],
            &k_best["from_head"],
            &k_best["to_layer"],
            &k_best["to_head"]
        ],
        [0, 0, 1, 0]
    );
    let full = v["ablation"]["full"].as_f64().unwrap();
    assert!(v["ablation"]["direct_path_only"].as_f64().unwrap() > full + 1.0);
    for f in ["composition.png", "head_scores.png", "patterns.png"] {
        assert!(
            std::fs::metadata(plots.join(f)).unwrap().len() > 1000,
            "{f}"
        );
    }
    // The text report too.
    assert!(microlens(&["circuits", &model]).contains("L1H0"));
}

#[test]
fn patch_json_restores_the_answer_at_the_corrupted_position() {
    let dir = tempfile::tempdir().unwrap();
    let model = toy(dir.path());
    let args = [
        "patch",
        &model,
        "--clean",
        "3,8,1,5,3,8,1",
        "--corrupt",
        "3,8,1,9,3,8,1",
        "--answer",
        "5",
        "--wrong",
        "9",
    ];
    let plots = dir.path().join("plots");
    let mut with_json = args.to_vec();
    with_json.extend(["--json", "--plot", plots.to_str().unwrap()]);
    let v: Value = serde_json::from_str(&microlens(&with_json)).unwrap();
    let n = &v["normalized"];
    assert!((n["resid_pre"][0][3].as_f64().unwrap() - 1.0).abs() < 1e-3);
    assert!(n["resid_pre"][0][2].as_f64().unwrap().abs() < 1e-3);
    assert!(n["head_out"][1][0].as_f64().unwrap() > 0.9);
    assert_eq!(v["head_out_by_pos"][0].as_array().unwrap().len(), 7);
    assert!(std::fs::metadata(plots.join("patching.png")).unwrap().len() > 1000);
    assert!(microlens(&args).contains("hook_resid_pre"));
}

#[test]
fn run_writes_the_activation_cache_under_transformer_lens_names() {
    use microlens_host::io::safetensors::read_safetensors;
    let dir = tempfile::tempdir().unwrap();
    let model = toy(dir.path());
    let (all, some) = (
        dir.path().join("all.safetensors"),
        dir.path().join("some.safetensors"),
    );
    let run = |extra: &[&str]| {
        let mut args = vec!["run", &model, "--tokens", "3,8,1,5,3,8,1"];
        args.extend(extra);
        microlens(&args)
    };
    // --cache changes nothing on stdout.
    assert_eq!(run(&["--cache", all.to_str().unwrap()]), run(&[]));
    let cache = read_safetensors(&all).unwrap();
    assert_eq!(cache["blocks.0.attn.hook_q"].shape, [7, 2, 24]);
    assert_eq!(cache["blocks.1.attn.hook_pattern"].shape, [2, 7, 7]);
    assert_eq!(cache["blocks.1.attn.hook_result"].shape, [7, 2, 60]);
    assert_eq!(cache["blocks.1.hook_resid_post"].shape, [7, 60]);
    assert_eq!(cache["hook_embed"].shape, [7, 60]);
    assert_eq!(cache["logits"].shape, [7, 12]);
    let scores = &cache["blocks.0.attn.hook_attn_scores"].data;
    assert_eq!(scores[1], f32::NEG_INFINITY);
    // The induction head's last row attends to position 3 (after the earlier 1).
    let pattern = &cache["blocks.1.attn.hook_pattern"].data;
    assert!(pattern[6 * 7 + 3] > 0.99);
    run(&[
        "--cache",
        some.to_str().unwrap(),
        "--names",
        r"hook_pattern$",
    ]);
    let names: Vec<String> = read_safetensors(&some).unwrap().into_keys().collect();
    assert_eq!(
        names,
        ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
    );
}
