//! `microlens run --window`: at every position of a stream longer than the context, the logits of a fresh
//! run over the window ending there, bit for bit, for a learned-position model (the shipped one), the
//! sinusoidal fixture, a two-layer rotary fixture (re-encoded) and a one-layer one (keys re-rotated,
//! nothing re-encoded); the CLI's errors.

use crate::common;

use std::process::Command;

use microlens::{Model, WindowMode};
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::eval::run::run_model;
use microlens_host::eval::window::run_window;

/// `tests/fixtures/sinusoidal` (made by the host's random models, not by TransformerLens).
fn sinusoidal_checkpoint() -> std::path::PathBuf {
    common::dir("sinusoidal").join("model.safetensors")
}

fn stream(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % vocab as u64) as u32
        })
        .collect()
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

fn check(name: &str, blob: &[u8], widths: &[usize], mode: WindowMode) {
    let model = Model::from_bytes(blob).unwrap();
    let cfg = *model.config();
    let tokens = stream(cfg.n_ctx * 3 / 2 + 5, cfg.d_vocab, cfg.n_ctx as u64);
    for &w in widths {
        let (logits, got) = run_window(&model, &tokens, w).unwrap();
        assert_eq!(got, mode, "{name}");
        for (t, row) in logits.iter().enumerate() {
            let fresh = run_model(&model, &tokens[(t + 1).saturating_sub(w)..=t]).unwrap();
            let last = fresh.logits.last().unwrap();
            assert_eq!(bits(row), bits(last), "{name} width {w} position {t}");
        }
    }
}

#[test]
fn window_equals_fresh_runs_for_learned_sinusoidal_and_rotary_models() {
    check(
        "shipped (learned)",
        &common::fidelity::shipped(),
        &[64, 9],
        WindowMode::ReEncode,
    );
    let sinusoidal = convert(&sinusoidal_checkpoint(), &ConvertOptions::default()).unwrap();
    check(
        "sinusoidal",
        &sinusoidal.blob,
        &[9, 4, 1],
        WindowMode::ReEncode,
    );
    check(
        "rotary_rms (2 layers)",
        &common::blob("rotary_rms", true),
        &[20, 6],
        WindowMode::ReEncode,
    );
    check(
        "rotary_adjacent_rmspre (1 layer)",
        &common::blob("rotary_adjacent_rmspre", true),
        &[16, 5, 1],
        WindowMode::Restore,
    );
}

#[test]
fn the_cli_streams_past_the_context_and_refuses_bad_windows() {
    let dir = tempfile::tempdir().unwrap();
    let checkpoint = sinusoidal_checkpoint();
    let blob = dir.path().join("model.mlb");
    let microlens = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_microlens"))
            .args(args)
            .output()
            .unwrap()
    };
    let path = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let out = microlens(&["convert", &path(&checkpoint), "-o", &path(&blob)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = microlens(&["inspect", &path(&blob)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("positional_embedding_type=\"sinusoidal\""),
        "{text}"
    );
    assert!(
        text.contains("no W_pos in flash, 432 bytes saved"),
        "{text}"
    );

    let d_vocab = 11;
    let tokens: Vec<String> = stream(25, d_vocab, 1).iter().map(u32::to_string).collect();
    let tokens = tokens.join(",");
    let out = microlens(&[
        "run",
        &path(&blob),
        "--tokens",
        &tokens,
        "--window",
        "5",
        "--hash",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hash = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let model_bytes = std::fs::read(&blob).unwrap();
    let model = Model::from_bytes(&model_bytes).unwrap();
    let (logits, _) = run_window(&model, &stream(25, d_vocab, 1), 5).unwrap();
    let expected = microlens_host::hash::logits_hash(logits.iter().map(Vec::as_slice));
    assert_eq!(hash, format!("logits_hash={expected:016x}"));

    for (args, mentions) in [
        (vec!["--window", "10"], "n_ctx = 9"),
        (vec!["--window", "0"], "n_ctx = 9"),
        (vec![], "--window"),
        (vec!["--window", "3", "--cache", "x.safetensors"], "--cache"),
    ] {
        let mut all = vec!["run", blob.to_str().unwrap(), "--tokens", &tokens];
        all.extend(args);
        let out = microlens(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(mentions),
            "{all:?}: {err}"
        );
    }
}
