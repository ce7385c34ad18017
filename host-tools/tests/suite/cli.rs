//! The `microlens` binary as scripts use it: outputs, exit codes, one-line errors, nothing half-written.

use crate::binary::{fixture, microlens, one_line_error};
use std::path::{Path, PathBuf};
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn converted(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(format!("{name}.mlb"));
    let ckpt = fixture(name).join("model.safetensors");
    let mut args = vec![
        "convert",
        ckpt.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let o = microlens(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn convert_inspect_run_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let blob = converted(dir.path(), "gpt2_like", &[]);
    let blob = blob.to_str().unwrap();

    let o = microlens(&["inspect", blob, "--json"]);
    assert!(o.status.success());
    let info: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        info.to_string().contains("LNPre"),
        "folded model is LNPre: {info}"
    );

    let o = microlens(&["run", blob, "--tokens", "3,1,4,1,5", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let logits = v["logits"].as_array().unwrap();
    assert_eq!(logits.len(), 5);
    assert_eq!(logits[0].as_array().unwrap().len(), 50);
    let patterns = v["patterns"].as_array().unwrap();
    assert_eq!(patterns.len(), 2);
    let row1 = &patterns[0][0][1];
    assert_eq!(row1.as_array().unwrap().len(), 5);
    assert_eq!(row1[2].as_f64(), Some(0.0), "zeros above the diagonal");

    let table = stdout(&microlens(&["run", blob, "--tokens", "3,1,4"]));
    assert!(table.lines().count() >= 3, "{table}");

    let hash = stdout(&microlens(&["run", blob, "--tokens", "3,1,4", "--hash"]));
    let hex = hash
        .trim()
        .strip_prefix("logits_hash=")
        .expect("logits_hash= line");
    assert!(
        hex.len() == 16 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "{hash}"
    );
}

/// `MICROLENS_SIMD=avx2` runs the host's kernels as on a CPU without AVX-512 (for measuring one): the
/// same logits hash, f32 and int8 (on a CPU without AVX-512 both runs take the same kernels).
#[test]
fn the_avx2_cap_gives_the_same_hash() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = "3,1,4,1,5,9,2,6,5,3,5,8,9,7,9,3";
    for (name, extra) in [("f32", &[][..]), ("i8", &["--dtype", "i8"][..])] {
        let blob = converted(dir.path(), "gpt2_like", extra);
        let args = ["run", blob.to_str().unwrap(), "--tokens", tokens, "--hash"];
        let widest = stdout(&microlens(&args));
        let capped = std::process::Command::new(env!("CARGO_BIN_EXE_microlens"))
            .env("MICROLENS_SIMD", "avx2")
            .args(args)
            .output()
            .unwrap();
        assert!(widest.starts_with("logits_hash="), "{name}: {widest}");
        assert_eq!(stdout(&capped), widest, "{name}");
    }
}

#[test]
fn bad_checkpoints_fail_with_one_line_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("attn_only_2l").join("model.safetensors")).unwrap();
    let truncated = dir.path().join("model.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    std::fs::copy(
        fixture("attn_only_2l").join("config.json"),
        dir.path().join("config.json"),
    )
    .unwrap();
    let out = dir.path().join("out.mlb");
    let o = microlens(&[
        "convert",
        truncated.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    one_line_error(&o, "model.safetensors");
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "no temporary file left behind"
    );

    let mut cfg: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("attn_only_2l").join("config.json")).unwrap(),
    )
    .unwrap();
    cfg["d_model"] = serde_json::json!(48);
    let bad_cfg = dir.path().join("bad.json");
    std::fs::write(&bad_cfg, cfg.to_string()).unwrap();
    let ckpt = fixture("attn_only_2l").join("model.safetensors");
    let o = microlens(&[
        "convert",
        ckpt.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--config",
        bad_cfg.to_str().unwrap(),
    ]);
    one_line_error(&o, "embed.W_E");
    assert!(!out.exists());
}

#[test]
fn bad_blobs_and_runs_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let blob = converted(dir.path(), "attn_only_2l", &["--no-fold-ln"]);
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    let corrupt = dir.path().join("corrupt.mlb");
    std::fs::write(&corrupt, &bytes).unwrap();
    one_line_error(
        &microlens(&["run", corrupt.to_str().unwrap(), "--tokens", "1"]),
        "CRC",
    );
    std::fs::write(&corrupt, &bytes[..100]).unwrap();
    one_line_error(
        &microlens(&["inspect", corrupt.to_str().unwrap()]),
        "truncated",
    );

    let blob = blob.to_str().unwrap();
    let too_long = vec!["1"; 17].join(",");
    one_line_error(&microlens(&["run", blob, "--tokens", &too_long]), "context");
    one_line_error(&microlens(&["run", blob, "--tokens", "1,64"]), "64");
}
