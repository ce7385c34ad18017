//! `microlens trace`, `edit` and `train-facts` through the binary: a JSON trace of the shipped fact
//! model, an edit with its JSON report, and what bad input gets (one line, nothing written).

use crate::binary::{convert_to, microlens, one_line_error};
use std::path::{Path, PathBuf};

fn model_file(ext: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../firmware-example/model/facts-4l.{ext}"))
}

fn converted(dir: &Path, dtype: &str) -> String {
    let ckpt = model_file("safetensors");
    let out = convert_to(dir, &ckpt, "facts", dtype, &["--rounding", "nearest"]);
    out.to_str().unwrap().to_string()
}

#[test]
fn trace_json_has_a_layer_by_position_table_per_kind() {
    let dir = tempfile::tempdir().unwrap();
    let m = converted(dir.path(), "f32");
    let args = [
        "trace",
        &m,
        "--prompt",
        "2,21,33",
        "--subject",
        "0..2",
        "--samples",
        "3",
        "--json",
    ];
    let o = microlens(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["answer"], 44);
    for kind in ["hook_resid_post", "hook_mlp_out", "hook_attn_out"] {
        let t = &v["tables"][kind]["indirect_effect"];
        assert_eq!(t.as_array().unwrap().len(), 4, "{kind}");
        assert_eq!(t[0].as_array().unwrap().len(), 3, "{kind}");
    }
    let again = microlens(&args);
    assert_eq!(o.stdout, again.stdout, "seeded: the same output twice");
}

#[test]
fn edit_json_reports_efficacy_specificity_and_each_dtype() {
    let dir = tempfile::tempdir().unwrap();
    let m = converted(dir.path(), "f32");
    let out = dir.path().join("edited.mlb");
    let facts = model_file("facts");
    let o = microlens(&[
        "edit",
        &m,
        "--prompt",
        "2,21,33",
        "--target",
        "40",
        "--unrelated",
        facts.to_str().unwrap(),
        "--dtypes",
        "i8",
        "--json",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["target_prob_before"].as_f64().unwrap() < 0.01);
    assert!(v["target_prob_after"].as_f64().unwrap() > 0.5);
    assert!(v["unrelated_mean_kl"].as_f64().unwrap() <= 0.05);
    assert_eq!(v["layer"], 1);
    assert_eq!(v["dtypes"][0]["dtype"], "i8");
    assert_eq!(v["dtypes"][0]["top1"], 1);
    let run = microlens(&[
        "run",
        out.to_str().unwrap(),
        "--tokens",
        "2,21,33",
        "--json",
    ]);
    assert!(run.status.success());
}

#[test]
fn bad_editing_input_gets_one_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = converted(dir.path(), "f32");
    let q = converted(dir.path(), "i8");
    let out = dir.path().join("x.mlb");
    let o = out.to_str().unwrap();
    one_line_error(
        &microlens(&["trace", &m, "--prompt", "1,2,3", "--subject", "2..5"]),
        "subject",
    );
    one_line_error(
        &microlens(&["trace", &m, "--prompt", "1,2,3", "--subject", "2-5"]),
        "START..END",
    );
    one_line_error(
        &microlens(&[
            "trace",
            &m,
            "--prompt",
            "1,2,3",
            "--subject",
            "0..1",
            "--noise",
            "nan",
        ]),
        "--noise",
    );
    one_line_error(
        &microlens(&["edit", &m, "--prompt", "1,2,3", "--target", "99", "-o", o]),
        "out of range",
    );
    one_line_error(
        &microlens(&["edit", &q, "--prompt", "1,2,3", "--target", "40", "-o", o]),
        "f32",
    );
    one_line_error(
        &microlens(&[
            "edit", &m, "--prompt", "1,2,3", "--target", "40", "--layer", "9", "-o", o,
        ]),
        "--layer",
    );
    one_line_error(
        &microlens(&["edit", &m, "--prompt", "1,2,3", "--target", "40", "-o", &m]),
        "input",
    );
    let bad = dir.path().join("bad.facts");
    std::fs::write(&bad, "1,2,3 -> 40\n1,2,3 40\n").unwrap();
    one_line_error(
        &microlens(&["edit", &m, "--facts", bad.to_str().unwrap(), "-o", o]),
        "line 2",
    );
    one_line_error(
        &microlens(&[
            "train-facts",
            "-o",
            dir.path().to_str().unwrap(),
            "--vocab",
            "8",
            "--subjects",
            "100",
        ]),
        "subjects",
    );
    assert!(!out.exists());
}
