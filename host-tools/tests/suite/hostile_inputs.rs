//! The `microlens` binary fed what a careless script or a hostile file gives it: every bad input gets one
//! clear stderr line and a non-zero exit (or works), never a panic (exit 101), an abort, a hang, or a
//! destroyed input. One test (or more) per finding of the reliability review, numbered as there.

use crate::binary::{fixture, one_line_error, s};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use microlens::blob::{self, Activations, Processing, TensorData};
use microlens::tensors::Catalogue;
use microlens::{Config, DType, Normalization, Positional};
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::{json, Value};

/// Runs `microlens args`, killing it after `limit` (a hang is a failure).
fn microlens_within(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_microlens"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("microlens runs");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        out.read_to_end(&mut v).ok();
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        err.read_to_end(&mut v).ok();
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            panic!("microlens {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

fn microlens(args: &[&str]) -> Output {
    microlens_within(args, Duration::from_secs(120))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[track_caller]
fn assert_ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status,
        text(&o.stderr)
    );
}

// ----------------------------------------------------------------------------------------------------
// Models made here: blobs written with the core's blob writer, TL checkpoints as safetensors + JSON.

/// An attention-only, norm-free config.
fn attn_only(
    n_layers: usize,
    d_model: usize,
    d_head: usize,
    d_vocab: usize,
    n_ctx: usize,
) -> Config {
    let mut cfg = Config::new(n_layers, d_model, 1, d_head, d_vocab, n_ctx, None);
    cfg.normalization = Normalization::None;
    cfg
}

/// A small deterministic generator in [-1, 1).
fn lcg(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// An `f32` blob of `cfg`: every value from `value(tensor name, seed state)`.
fn blob_of(cfg: &Config, value: impl Fn(&str, &mut u64) -> f32) -> Vec<u8> {
    let mut seed = 7;
    let tensors: Vec<TensorData> = Catalogue::new(cfg)
        .ids()
        .map(|id| {
            let shape = id.shape(cfg);
            let name = id.to_string();
            let data = (0..shape[0] * shape[1])
                .flat_map(|_| value(&name, &mut seed).to_le_bytes())
                .collect();
            TensorData {
                id,
                dtype: DType::F32,
                shape,
                data,
                scales: vec![],
            }
        })
        .collect();
    let processing = Processing::none(cfg.normalization);
    blob::write(cfg, processing, Activations::F32, &tensors).unwrap()
}

/// Small random weights (the residual stream stays finite over 256 layers).
fn random_blob(cfg: &Config) -> Vec<u8> {
    blob_of(cfg, |_, seed| 0.05 * lcg(seed))
}

/// 256 layers, n_ctx 2^20, rotary (no W_pos): a small blob whose full-context KV cache is 32 GiB.
fn absurd_context() -> Config {
    let mut cfg = attn_only(256, 4, 16, 8, 1 << 20);
    cfg.positional = Positional::Rotary {
        dim: 16,
        base: 10000.0,
        adjacent_pairs: false,
    };
    cfg
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A TL checkpoint (attention-only; no norm or LN) with every value from `value`: `model.safetensors`
/// and `config.json` in `dir`.
fn checkpoint(dir: &Path, cfg: &Config, value: impl Fn(&str, &mut u64) -> f32) -> PathBuf {
    let (d, h, dh, v) = (cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_vocab);
    let mut shapes: Vec<(String, Vec<usize>)> = vec![("embed.W_E".into(), vec![v, d])];
    if cfg.positional == Positional::Standard {
        shapes.push(("pos_embed.W_pos".into(), vec![cfg.n_ctx, d]));
    }
    let ln = cfg.normalization == Normalization::LN;
    for l in 0..cfg.n_layers {
        if ln {
            shapes.push((format!("blocks.{l}.ln1.w"), vec![d]));
            shapes.push((format!("blocks.{l}.ln1.b"), vec![d]));
        }
        for m in ["W_Q", "W_K", "W_V"] {
            shapes.push((format!("blocks.{l}.attn.{m}"), vec![h, d, dh]));
        }
        for b in ["b_Q", "b_K", "b_V"] {
            shapes.push((format!("blocks.{l}.attn.{b}"), vec![h, dh]));
        }
        shapes.push((format!("blocks.{l}.attn.W_O"), vec![h, dh, d]));
        shapes.push((format!("blocks.{l}.attn.b_O"), vec![d]));
    }
    if ln {
        shapes.push(("ln_final.w".into(), vec![d]));
        shapes.push(("ln_final.b".into(), vec![d]));
    }
    shapes.push(("unembed.W_U".into(), vec![d, cfg.d_vocab_out]));
    shapes.push(("unembed.b_U".into(), vec![cfg.d_vocab_out]));
    let mut seed = 11;
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = shapes
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let bytes = (0..n)
                .flat_map(|_| value(&name, &mut seed).to_le_bytes())
                .collect();
            (name, shape, bytes)
        })
        .collect();
    let views: Vec<(&str, TensorView<'_>)> = data
        .iter()
        .map(|(n, sh, b)| {
            (
                n.as_str(),
                TensorView::new(Dtype::F32, sh.clone(), b).unwrap(),
            )
        })
        .collect();
    let path = dir.join("model.safetensors");
    std::fs::write(&path, safetensors::serialize(views, None).unwrap()).unwrap();
    let mut json = json!({
        "n_layers": cfg.n_layers, "d_model": d, "n_ctx": cfg.n_ctx, "d_head": dh, "n_heads": h,
        "d_mlp": null, "act_fn": null, "d_vocab": v, "d_vocab_out": cfg.d_vocab_out, "eps": 1e-5,
        "attn_only": true, "normalization_type": null, "positional_embedding_type": "standard",
        "use_attn_scale": true, "attn_scale": (dh as f64).sqrt(),
    });
    if ln {
        json["normalization_type"] = json!("LN");
    }
    if let Positional::Rotary { dim, .. } = cfg.positional {
        json["positional_embedding_type"] = json!("rotary");
        json["rotary_dim"] = json!(dim);
        json["rotary_base"] = json!(10000);
    }
    std::fs::write(dir.join("config.json"), json.to_string()).unwrap();
    path
}

/// The attn_only_2l fixture converted to a blob in `dir`.
fn fixture_blob(dir: &Path) -> PathBuf {
    let out = dir.join("m.mlb");
    let ckpt = fixture("attn_only_2l").join("model.safetensors");
    assert_ok(&microlens(&["convert", s(&ckpt), "-o", s(&out)]));
    out
}

/// The attn_only_2l fixture copied into `dir` (checkpoint and config).
fn fixture_copy(dir: &Path) -> (PathBuf, PathBuf) {
    let (ck, cf) = (dir.join("model.safetensors"), dir.join("config.json"));
    std::fs::copy(fixture("attn_only_2l").join("model.safetensors"), &ck).unwrap();
    std::fs::copy(fixture("attn_only_2l").join("config.json"), &cf).unwrap();
    (ck, cf)
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

// ----------------------------------------------------------------------------------------------------
// 1. Outputs through links, FIFOs and devices.

#[test]
fn item01_output_symlink_is_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, _) = fixture_copy(dir.path());
    let target = write(dir.path(), "target.mlb", b"old");
    let link = dir.path().join("link.mlb");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_ok(&microlens(&["convert", s(&ck), "-o", s(&link)]));
    assert!(
        link.symlink_metadata().unwrap().file_type().is_symlink(),
        "the link was replaced by a file"
    );
    let written = std::fs::read(&target).unwrap();
    assert!(written.len() > 100 && written.starts_with(b"MLNS") || written.len() > 100);
    assert_ok(&microlens(&["inspect", s(&link)]));
}

#[test]
fn item01_non_regular_outputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, _) = fixture_copy(dir.path());
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    one_line_error(
        &microlens(&["convert", s(&ck), "-o", s(&fifo)]),
        "not a regular file",
    );
    assert!(fifo.symlink_metadata().unwrap().file_type().is_fifo());
    let blob = fixture_blob(dir.path());
    one_line_error(
        &microlens(&["run", s(&blob), "--tokens", "1,2", "--cache", s(&fifo)]),
        "not a regular file",
    );
    assert!(fifo.symlink_metadata().unwrap().file_type().is_fifo());
    // A link to a FIFO, and a directory, are refused too.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    one_line_error(
        &microlens(&["convert", s(&ck), "-o", s(&link)]),
        "not a regular file",
    );
    one_line_error(
        &microlens(&["convert", s(&ck), "-o", s(dir.path())]),
        "not a regular file",
    );
    // A character device (never replaced, whoever runs this).
    one_line_error(
        &microlens(&["convert", s(&ck), "-o", "/dev/null"]),
        "not a regular file",
    );
    assert!(Path::new("/dev/null")
        .metadata()
        .unwrap()
        .file_type()
        .is_char_device());
}

// 2. An output equal to an input.

#[test]
fn item02_output_equal_to_an_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, cf) = fixture_copy(dir.path());
    let (ck_bytes, cf_bytes) = (std::fs::read(&ck).unwrap(), std::fs::read(&cf).unwrap());
    one_line_error(
        &microlens(&["convert", s(&ck), "--config", s(&cf), "-o", s(&ck)]),
        "input",
    );
    one_line_error(&microlens(&["convert", s(&ck), "-o", s(&cf)]), "input");
    // The same file by another name: a relative path, a hard link.
    let hard = dir.path().join("hard.json");
    std::fs::hard_link(&cf, &hard).unwrap();
    one_line_error(&microlens(&["convert", s(&ck), "-o", s(&hard)]), "input");
    let dotted = dir.path().join(".").join("model.safetensors");
    one_line_error(&microlens(&["convert", s(&ck), "-o", s(&dotted)]), "input");
    assert_eq!(
        std::fs::read(&ck).unwrap(),
        ck_bytes,
        "checkpoint destroyed"
    );
    assert_eq!(std::fs::read(&cf).unwrap(), cf_bytes, "config destroyed");

    let blob = fixture_blob(dir.path());
    let blob_bytes = std::fs::read(&blob).unwrap();
    one_line_error(
        &microlens(&["run", s(&blob), "--tokens", "1,2", "--cache", s(&blob)]),
        "input",
    );
    assert_eq!(std::fs::read(&blob).unwrap(), blob_bytes, "blob destroyed");
}

// 3. A valid blob with an absurd context: allocate for the tokens run.

#[test]
fn item03_absurd_context_blob_runs_the_tokens_given() {
    let dir = tempfile::tempdir().unwrap();
    let blob = write(dir.path(), "big.mlb", &random_blob(&absurd_context()));
    let o = microlens(&["run", s(&blob), "--tokens", "1,2,3", "--hash"]);
    assert_ok(&o);
    assert!(text(&o.stdout).starts_with("logits_hash="));
    assert_ok(&microlens(&[
        "run",
        s(&blob),
        "--tokens",
        "1,2,3",
        "--cache",
        s(&dir.path().join("c.st")),
    ]));
    assert_ok(&microlens(&["inspect", s(&blob)]));
}

#[test]
fn item03_absurd_context_checkpoint_converts_to_i4() {
    let dir = tempfile::tempdir().unwrap();
    // 64 layers of 4 heads of 16: the same 32 GiB full-context cache, fewer sites to calibrate.
    let mut cfg = absurd_context();
    (cfg.n_layers, cfg.n_heads) = (64, 4);
    let ck = checkpoint(dir.path(), &cfg, |_, seed| 0.05 * lcg(seed));
    let out = dir.path().join("i4.mlb");
    let o = microlens(&[
        "convert",
        s(&ck),
        "-o",
        s(&out),
        "--dtype",
        "i4",
        "--calibration-sequences",
        "1",
        "--calibration-inputs",
        "float",
    ]);
    assert_ok(&o);
    assert_ok(&microlens(&["run", s(&out), "--tokens", "1,2,3"]));
}

// 4. fidelity's default --seq-len on such a blob.

#[test]
fn item04_fidelity_default_seq_len_on_an_absurd_context() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = absurd_context();
    cfg.n_layers = 2;
    let blob = write(dir.path(), "big.mlb", &random_blob(&cfg));
    let o = microlens(&["fidelity", s(&blob), s(&blob), "--sequences", "2"]);
    assert_ok(&o);
}

// 5. circuits with n_ctx = 1.

#[test]
fn item05_circuits_with_a_context_of_one() {
    let dir = tempfile::tempdir().unwrap();
    let blob = write(
        dir.path(),
        "c1.mlb",
        &random_blob(&attn_only(1, 4, 2, 5, 1)),
    );
    one_line_error(&microlens(&["circuits", s(&blob)]), "n_ctx");
}

// 6. Absurd sequence counts.

#[test]
fn item06_absurd_sequence_counts_are_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let blob = fixture_blob(dir.path());
    let quick = Duration::from_secs(20);
    for n in ["18446744073709551615", "1000000000"] {
        one_line_error(
            &microlens_within(&["fidelity", s(&blob), s(&blob), "--sequences", n], quick),
            "--sequences",
        );
        one_line_error(
            &microlens_within(&["circuits", s(&blob), "--sequences", n], quick),
            "--sequences",
        );
        let ck = fixture("attn_only_2l").join("model.safetensors");
        let out = dir.path().join("q.mlb");
        one_line_error(
            &microlens_within(
                &[
                    "convert",
                    s(&ck),
                    "-o",
                    s(&out),
                    "--dtype",
                    "i8",
                    "--calibration-sequences",
                    n,
                ],
                quick,
            ),
            "--calibration-sequences",
        );
        assert!(!out.exists());
    }
}

// 7. Endless streams as inputs.

#[test]
fn item07_endless_streams_fail_on_their_first_bytes() {
    let quick = Duration::from_secs(20);
    one_line_error(
        &microlens_within(&["run", "/dev/zero", "--tokens", "1"], quick),
        "/dev/zero",
    );
    one_line_error(
        &microlens_within(&["inspect", "/dev/urandom"], quick),
        "/dev/urandom",
    );
    one_line_error(
        &microlens_within(&["eval-induction", "/dev/zero"], quick),
        "/dev/zero",
    );
    one_line_error(
        &microlens_within(&["generate", "/dev/zero", "--tokens", "1"], quick),
        "/dev/zero",
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = fixture("attn_only_2l").join("config.json");
    let out = dir.path().join("o.mlb");
    one_line_error(
        &microlens_within(
            &["convert", "/dev/zero", "--config", s(&cfg), "-o", s(&out)],
            quick,
        ),
        "/dev/zero",
    );
    one_line_error(
        &microlens_within(
            &[
                "convert",
                "/dev/urandom",
                "--config",
                s(&cfg),
                "-o",
                s(&out),
            ],
            quick,
        ),
        "/dev/urandom",
    );
    let ck = fixture("attn_only_2l").join("model.safetensors");
    one_line_error(
        &microlens_within(
            &["convert", s(&ck), "--config", "/dev/zero", "-o", s(&out)],
            quick,
        ),
        "/dev/zero",
    );
    let blob = fixture_blob(dir.path());
    one_line_error(
        &microlens_within(
            &["fidelity", s(&blob), s(&blob), "--tokens", "/dev/zero"],
            quick,
        ),
        "/dev/zero",
    );
    assert!(!out.exists());
}

#[test]
fn item07_a_blob_through_a_pipe_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let blob = fixture_blob(dir.path());
    let fifo = dir.path().join("pipe.mlb");
    mkfifo(&fifo);
    let (b, f) = (blob.clone(), fifo.clone());
    let feeder = std::thread::spawn(move || {
        let bytes = std::fs::read(b).unwrap();
        std::fs::write(f, bytes).ok();
    });
    assert_ok(&microlens(&["run", s(&fifo), "--tokens", "1,2", "--hash"]));
    feeder.join().unwrap();
}

// 8. Broken pipes.

#[test]
fn item08_a_closed_stdout_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let blob = fixture_blob(dir.path());
    for args in [
        vec!["run", s(&blob), "--tokens", "1,2,3", "--json"],
        vec!["run", s(&blob), "--tokens", "1,2,3"],
        vec!["inspect", s(&blob)],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_microlens"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader is gone before the first write: `| head -c0`
        let o = child.wait_with_output().unwrap();
        let err = text(&o.stderr);
        assert!(err.is_empty(), "{args:?}: stderr {err:?}");
        assert_ne!(o.status.code(), Some(101), "{args:?} panicked");
    }
}

// 9. One-line errors.

#[test]
fn item09_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let blob = fixture_blob(dir.path());
    let cache = dir.path().join("c.st");
    one_line_error(
        &microlens(&[
            "run",
            s(&blob),
            "--tokens",
            "1",
            "--cache",
            s(&cache),
            "--names",
            "(",
        ]),
        "--names",
    );
    one_line_error(&microlens(&["run", s(&blob), "--tokens", "-1"]), "-1");
    one_line_error(
        &microlens(&["fidelity", s(&blob), s(&blob), "--emulate-int8", "bad"]),
        "bad",
    );
    one_line_error(
        &microlens(&["fidelity", s(&blob), s(&blob), "--emulate-integer", "nope"]),
        "nope",
    );
    one_line_error(
        &microlens(&[
            "patch",
            s(&blob),
            "--clean",
            "1,2",
            "--corrupt",
            "1,3",
            "--answer=-1",
            "--wrong",
            "2",
        ]),
        "-1",
    );
    one_line_error(&microlens(&["inspect"]), "<MODEL>");
    one_line_error(&microlens(&["frobnicate"]), "frobnicate");
}

// 10. Huge finite weights.

#[test]
fn item10_non_finite_logits_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = attn_only(1, 4, 2, 5, 8);
    let ck = checkpoint(dir.path(), &cfg, |name, seed| {
        if name.contains("W_U") || name.contains("W_E") {
            3e38 * (0.5 + 0.5 * lcg(seed).abs())
        } else {
            lcg(seed)
        }
    });
    let out = dir.path().join("huge.mlb");
    let o = microlens(&[
        "convert",
        s(&ck),
        "-o",
        s(&out),
        "--no-center-unembed",
        "--no-center-writing-weights",
    ]);
    if o.status.success() {
        one_line_error(
            &microlens(&["run", s(&out), "--tokens", "1,2"]),
            "non-finite",
        );
    } else {
        one_line_error(&o, "overflow");
    }
}

// 11. train-induction's learning rate and output, checked before training.

#[test]
fn item11_train_induction_checks_its_arguments_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    for lr in ["NaN", "inf", "-1", "0"] {
        let o = microlens_within(
            &[
                "train-induction",
                "-o",
                s(&out),
                "--lr",
                lr,
                "--steps",
                "3",
                "--eval-size",
                "4",
            ],
            Duration::from_secs(60),
        );
        one_line_error(&o, "--lr");
        assert!(!out.exists(), "--lr {lr}: wrote {out:?}");
    }
    let file = write(dir.path(), "existing", b"keep me");
    let o = microlens_within(
        &[
            "train-induction",
            "-o",
            s(&file),
            "--steps",
            "3",
            "--eval-size",
            "4",
        ],
        Duration::from_secs(60),
    );
    one_line_error(&o, "not a directory");
    assert!(!text(&o.stdout).contains("trained"), "it trained first");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
}

/// `train-llama` refuses what cannot train before it generates or allocates anything, naming the
/// flag; nothing is written.
#[test]
fn train_llama_checks_its_arguments_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let huge = "18446744073709551615";
    for (flags, needle) in [
        (&["--lr", "NaN"][..], "--lr"),
        (&["--steps", "0"][..], "--steps"),
        (&["--batch", huge][..], "GiB to train"),
        (&["--n-ctx", "0"][..], "n_ctx 0"),
        (&["--n-ctx", huge][..], "n_ctx"),
        (&["--vocab", "4294967296"][..], "d_vocab"),
        (&["--vocab", "10"][..], "vocabulary of 10"),
        (&["--d-mlp", huge][..], "d_mlp"),
        (&["--kv-heads", "3"][..], "n_kv_heads 3"),
        (&["--heads", "0"][..], "--heads 0"),
        (&["--layers", "100000"][..], "parameters"),
        (&["--stories", "0"][..], "--stories"),
        (&["--stories", "1"][..], "--stories 1"),
        (&["--induction-share", "9"][..], "--induction-share"),
        (&["--induction-warmup", "5401"][..], "--induction-warmup"),
        (&["--warmup-ctx", "129"][..], "--warmup-ctx"),
        // A warm-up too short for a repeated segment, refused before the corpus is generated.
        (
            &["--induction-warmup", "10", "--warmup-ctx", "4"][..],
            "--warmup-ctx 4 is too short",
        ),
    ] {
        let args = [&["train-llama", "-o", s(&out)][..], flags].concat();
        let o = microlens_within(&args, Duration::from_secs(60));
        one_line_error(&o, needle);
        assert!(!out.exists(), "{flags:?}: wrote {out:?}");
    }
    let file = write(dir.path(), "existing", b"keep me");
    let o = microlens_within(&["train-llama", "-o", s(&file)], Duration::from_secs(60));
    one_line_error(&o, "not a directory");
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
}

// 12. 0/0 printed as figures.

#[test]
fn item12_degenerate_comparisons_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let blob = fixture_blob(dir.path());
    let b = s(&blob);
    one_line_error(
        &microlens(&[
            "patch",
            b,
            "--clean",
            "1,2,3",
            "--corrupt",
            "1,5,3",
            "--answer",
            "4",
            "--wrong",
            "4",
        ]),
        "--wrong",
    );
    one_line_error(
        &microlens(&[
            "patch",
            b,
            "--clean",
            "1,2,3",
            "--corrupt",
            "1,2,3",
            "--answer",
            "4",
            "--wrong",
            "5",
        ]),
        "identical",
    );
    one_line_error(&microlens(&["circuits", b, "--half", "0"]), "--half");
    let o = microlens(&[
        "fidelity",
        b,
        b,
        "--seq-len",
        "2",
        "--sequences",
        "3",
        "--json",
    ]);
    assert_ok(&o);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        !v.to_string().contains("NaN") && !v.to_string().contains("null")
            || v.to_string().contains("\"repeated_positions\":0"),
        "0/0 in {v}"
    );
    let table = microlens(&["fidelity", b, b, "--seq-len", "2", "--sequences", "3"]);
    assert_ok(&table);
    assert!(
        !text(&table.stdout).contains("NaN"),
        "{}",
        text(&table.stdout)
    );
}

// 13. GPTQ on d_model = 1 names the Hessian.

#[test]
fn item13_gptq_failure_names_the_hessian() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = attn_only(1, 1, 1, 5, 8);
    cfg.normalization = Normalization::LN;
    let ck = checkpoint(dir.path(), &cfg, |_, seed| lcg(seed));
    let out = dir.path().join("q.mlb");
    let o = microlens(&["convert", s(&ck), "-o", s(&out), "--dtype", "i8"]);
    if !o.status.success() {
        one_line_error(&o, "Hessian");
        assert!(
            !text(&o.stderr).contains("has a NaN or infinite value")
                || text(&o.stderr).contains("Hessian")
        );
    }
}

// 14. Output modes follow the umask.

#[test]
fn item14_outputs_get_the_umask_mode() {
    let dir = tempfile::tempdir().unwrap();
    let blob = fixture_blob(dir.path());
    let mode = blob.metadata().unwrap().permissions().mode() & 0o777;
    // The test harness runs under the usual umask 022 (or stricter group/other bits).
    assert_ne!(mode, 0o600, "blob written 0600");
    assert_eq!(mode & 0o600, 0o600);
    let cache = dir.path().join("c.st");
    assert_ok(&microlens(&[
        "run",
        s(&blob),
        "--tokens",
        "1",
        "--cache",
        s(&cache),
    ]));
    assert_eq!(cache.metadata().unwrap().permissions().mode() & 0o777, mode);
    // Rewriting an existing file keeps its mode.
    std::fs::set_permissions(&blob, std::fs::Permissions::from_mode(0o640)).unwrap();
    let ck = fixture("attn_only_2l").join("model.safetensors");
    assert_ok(&microlens(&["convert", s(&ck), "-o", s(&blob)]));
    assert_eq!(blob.metadata().unwrap().permissions().mode() & 0o777, 0o640);
}

// 15. A missing checkpoint is named.

#[test]
fn item15_a_missing_checkpoint_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.safetensors");
    let out = dir.path().join("x.mlb");
    one_line_error(
        &microlens(&["convert", s(&missing), "-o", s(&out)]),
        "missing.safetensors",
    );
    assert!(!text(&microlens(&["convert", s(&missing), "-o", s(&out)]).stderr).contains("config"));
}

// 16 is a core API test (core/tests/hostile.rs).

// Beyond the review's list: more of what a careless script passes.

#[test]
fn more_train_induction_sizes_are_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    for extra in [
        ["--n-ctx", "100000000"],
        ["--eval-size", "100000000000"],
        ["--batch", "100000000"],
        ["--eval-size", "0"],
    ] {
        let mut args = vec!["train-induction", "-o", s(&out), "--steps", "2"];
        args.extend(extra);
        let o = microlens_within(&args, Duration::from_secs(30));
        one_line_error(&o, &extra[0][2..]);
        assert!(!out.exists(), "{extra:?}");
    }
}

#[test]
fn huge_counts_and_odd_token_lists() {
    let dir = tempfile::tempdir().unwrap();
    let blob = fixture_blob(dir.path());
    let b = s(&blob);
    let top = microlens_within(
        &[
            "circuits",
            b,
            "--top",
            "18446744073709551615",
            "--sequences",
            "1",
        ],
        Duration::from_secs(60),
    );
    assert_ok(&top);
    for tokens in ["", "1,,2", " ", "1;2", "99999999999"] {
        one_line_error(&microlens(&["run", b, "--tokens", tokens]), "token");
    }
    one_line_error(
        &microlens(&["fidelity", b, b, "--seq-len", "18446744073709551615"]),
        "--seq-len",
    );
    one_line_error(&microlens(&["inspect", s(dir.path())]), "directory");
    let cache = dir.path().join("missing-dir").join("c.st");
    one_line_error(
        &microlens(&["run", b, "--tokens", "1", "--cache", s(&cache)]),
        "missing-dir",
    );
    // A truncated blob behind a good preamble, and an empty file.
    let bytes = std::fs::read(&blob).unwrap();
    let cut = write(dir.path(), "cut.mlb", &bytes[..64]);
    one_line_error(&microlens(&["inspect", s(&cut)]), "truncated");
    let empty = write(dir.path(), "empty.mlb", b"");
    one_line_error(
        &microlens(&["run", s(&empty), "--tokens", "1"]),
        "truncated",
    );
    // Trailing bytes after a blob.
    let mut long = bytes.clone();
    long.extend_from_slice(&[0; 7]);
    let long = write(dir.path(), "long.mlb", &long);
    one_line_error(&microlens(&["inspect", s(&long)]), "long.mlb");
}

// ----------------------------------------------------------------------------------------------------
// Third pass: no output ever lands on an input (plots included), every count bounded before allocation,
// every parser bounded, errors short.

/// The shipped fact model (attention + MLPs) converted to an `f32` blob in `dir`.
fn facts_blob(dir: &Path) -> PathBuf {
    let out = dir.join("facts.mlb");
    let ckpt = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../firmware-example/model/facts-4l.safetensors");
    assert_ok(&microlens(&["convert", s(&ckpt), "-o", s(&out)]));
    out
}

/// The `microlens` arguments of each command that writes `--plot DIR`, the model it reads and one file
/// it writes there.
fn plot_commands<'a>(facts: &'a str, attn: &'a str) -> Vec<(Vec<&'a str>, &'a str, &'static str)> {
    vec![
        (
            vec![
                "trace",
                facts,
                "--prompt",
                "2,21,33",
                "--subject",
                "0..2",
                "--samples",
                "1",
            ],
            facts,
            "trace.png",
        ),
        (
            vec!["circuits", attn, "--sequences", "1"],
            attn,
            "patterns.png",
        ),
        (
            vec![
                "patch",
                attn,
                "--clean",
                "1,2,3,1",
                "--corrupt",
                "1,7,3,1",
                "--answer",
                "2",
                "--wrong",
                "7",
            ],
            attn,
            "patching.png",
        ),
        (
            vec!["fidelity", attn, attn, "--sequences", "2"],
            attn,
            "heads.png",
        ),
    ]
}

/// Files in `dir` named like a temporary output.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".microlens-"))
        .collect()
}

#[test]
fn third01_plots_never_land_on_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let (facts, attn) = (facts_blob(dir.path()), fixture_blob(dir.path()));
    for (i, (args, model, png)) in plot_commands(s(&facts), s(&attn)).into_iter().enumerate() {
        let before = std::fs::read(model).unwrap();
        for how in ["symlink", "hard link"] {
            let plot = dir.path().join(format!("plot-{i}-{}", how.len()));
            std::fs::create_dir(&plot).unwrap();
            if how == "symlink" {
                std::os::unix::fs::symlink(model, plot.join(png)).unwrap();
            } else {
                std::fs::hard_link(model, plot.join(png)).unwrap();
            }
            let mut args = args.clone();
            args.extend(["--plot", s(&plot)]);
            one_line_error(&microlens(&args), "input");
            assert_eq!(
                std::fs::read(model).unwrap(),
                before,
                "{args:?} ({how}) destroyed the model"
            );
            assert!(
                temporaries(&plot).is_empty(),
                "{args:?} left a temporary file"
            );
        }
    }
}

#[test]
fn third02_plots_are_replaced_by_a_rename() {
    let dir = tempfile::tempdir().unwrap();
    let (facts, attn) = (facts_blob(dir.path()), fixture_blob(dir.path()));
    for (i, (args, _, png)) in plot_commands(s(&facts), s(&attn)).into_iter().enumerate() {
        let plot = dir.path().join(format!("plot-{i}"));
        std::fs::create_dir(&plot).unwrap();
        // Another name of the old plot keeps the old bytes: the new one is a new file renamed in.
        let keep = write(dir.path(), &format!("keep-{i}.png"), b"old plot");
        std::fs::hard_link(&keep, plot.join(png)).unwrap();
        let mut args = args.clone();
        args.extend(["--plot", s(&plot)]);
        assert_ok(&microlens(&args));
        assert_eq!(
            std::fs::read(&keep).unwrap(),
            b"old plot",
            "{args:?} wrote in place"
        );
        assert!(std::fs::read(plot.join(png))
            .unwrap()
            .starts_with(b"\x89PNG"));
        assert!(
            temporaries(&plot).is_empty(),
            "{args:?} left a temporary file"
        );
    }
}

#[test]
fn third03_every_input_is_guarded_whichever_option_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let facts = facts_blob(dir.path());
    // Facts the model does not know yet (an edit to write), and unrelated prompts.
    let f = write(dir.path(), "f.facts", b"2,21,33 -> 40\n3,22,33 -> 41\n");
    let u = write(dir.path(), "u.facts", b"1,2,34 -> 40\n3,4,34 -> 41\n");
    let keep = |p: &Path| std::fs::read(p).unwrap();
    let (f_bytes, u_bytes) = (keep(&f), keep(&u));
    let edited = dir.path().join("e.mlb");
    one_line_error(
        &microlens(&[
            "edit",
            s(&facts),
            "--facts",
            s(&f),
            "--no-quantise",
            "-o",
            s(&f),
        ]),
        "input",
    );
    assert_eq!(keep(&f), f_bytes, "edit --facts F -o F destroyed F");
    let args = [
        "edit",
        s(&facts),
        "--prompt",
        "2,21,33",
        "--target",
        "40",
        "--no-quantise",
    ];
    let mut with_u = args.to_vec();
    with_u.extend(["--unrelated", s(&u), "-o", s(&u)]);
    one_line_error(&microlens(&with_u), "input");
    assert_eq!(keep(&u), u_bytes, "edit --unrelated U -o U destroyed U");
    assert!(!edited.exists());

    let (ck, _) = fixture_copy(dir.path());
    let c = write(dir.path(), "c.tokens", b"1,2,3,4\n5,6,7,8\n");
    let c_bytes = keep(&c);
    one_line_error(
        &microlens(&[
            "convert",
            s(&ck),
            "--dtype",
            "i8",
            "--calibration-tokens",
            s(&c),
            "-o",
            s(&c),
        ]),
        "input",
    );
    assert_eq!(
        keep(&c),
        c_bytes,
        "convert --calibration-tokens C -o C destroyed C"
    );
    // Through a symbolic link to the input too.
    let link = dir.path().join("link.tokens");
    std::os::unix::fs::symlink(&c, &link).unwrap();
    one_line_error(
        &microlens(&[
            "convert",
            s(&ck),
            "--dtype",
            "i8",
            "--calibration-tokens",
            s(&c),
            "-o",
            s(&link),
        ]),
        "input",
    );
    assert_eq!(keep(&c), c_bytes);
}

/// A child process killed if the test fails before it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0.try_wait().is_ok_and(|s| s.is_none()) {
            self.0.kill().ok();
            self.0.wait().ok();
        }
    }
}

/// Sends `signal` to a `convert` once its temporary output exists: the process dies of the signal and
/// leaves neither the temporary file nor an output behind.
fn killed_convert_leaves_nothing(signal: i32) {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    // Slow enough to be caught in the middle: GPTQ over 4 layers of a 256-token context.
    let cfg = attn_only(4, 64, 16, 64, 256);
    let ck = checkpoint(dir.path(), &cfg, |_, seed| 0.1 * lcg(seed));
    let out = dir.path().join("slow.mlb");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_microlens"));
    // A shell's background job inherits SIGINT ignored (and convert keeps an inherited ignore, as
    // `nohup` expects): the child gets the default disposition, whatever started the tests.
    // SAFETY: `signal` is async-signal-safe, called in the child between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(signal, libc::SIG_DFL);
            Ok(())
        });
    }
    let child = cmd
        .args([
            "convert",
            s(&ck),
            "-o",
            s(&out),
            "--dtype",
            "i4",
            "--calibration-sequences",
            "4096",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let child = &mut child.0;
    let start = Instant::now();
    while temporaries(dir.path()).is_empty() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "convert ended without a temporary output to clean up"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no temporary output after 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: `kill` sends a signal to the child this test spawned.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(signal), "{status:?}");
    assert!(
        temporaries(dir.path()).is_empty(),
        "a temporary file was left behind"
    );
    assert!(!out.exists());
}

#[test]
fn third04_a_signal_leaves_no_temporary_file() {
    killed_convert_leaves_nothing(libc::SIGTERM);
    killed_convert_leaves_nothing(libc::SIGINT);
}

#[test]
fn third05_counts_are_bounded_before_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let (facts, attn) = (facts_blob(dir.path()), fixture_blob(dir.path()));
    let (m, a) = (s(&facts), s(&attn));
    let out = dir.path().join("e.mlb");
    let quick = Duration::from_secs(30);
    for n in ["18446744073709551615", "1000000000"] {
        let o = microlens_within(
            &[
                "edit",
                m,
                "--prompt",
                "2,21,33",
                "--target",
                "40",
                "--calibration",
                n,
                "-o",
                s(&out),
            ],
            quick,
        );
        one_line_error(&o, "--calibration");
        assert!(text(&o.stderr).contains("GiB"), "{}", text(&o.stderr));
        let o = microlens_within(&["eval-induction", a, "--sequences", n], quick);
        one_line_error(&o, "--sequences");
        let o = microlens_within(
            &["generate", a, "--tokens", "1,2", "--max-new-tokens", n],
            quick,
        );
        one_line_error(&o, "--max-new-tokens");
        let o = microlens_within(
            &[
                "trace",
                m,
                "--prompt",
                "2,21,33",
                "--subject",
                "0..2",
                "--samples",
                n,
            ],
            quick,
        );
        one_line_error(&o, "--samples");
    }
    assert!(!out.exists());
    // Out of a documented range: refused, not clamped.
    one_line_error(
        &microlens(&["eval-induction", a, "--sequences", "0"]),
        "--sequences",
    );
    for half in ["0", "9", "33"] {
        one_line_error(&microlens(&["circuits", a, "--half", half]), "--half");
    }
    one_line_error(
        &microlens(&[
            "trace",
            m,
            "--prompt",
            "2,21,33",
            "--subject",
            "0..2",
            "--samples",
            "0",
        ]),
        "--samples",
    );
    // Options that would be ignored.
    one_line_error(
        &microlens(&[
            "edit",
            m,
            "--prompt",
            "2,21,33",
            "--target",
            "40",
            "--no-quantise",
            "--dtypes",
            "i8",
            "-o",
            s(&out),
        ]),
        "--dtypes",
    );
    assert!(!out.exists());
    // Noise that overflows the embeddings is named as such.
    let o = microlens(&[
        "trace",
        m,
        "--prompt",
        "2,21,33",
        "--subject",
        "0..2",
        "--noise",
        "1e38",
    ]);
    one_line_error(&o, "--noise");
}

#[test]
fn third06_train_facts_sizes_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let huge = "1000000000000";
    let wrap = "4294967296";
    for extra in [
        vec!["--relations", huge],
        vec!["--heads", huge],
        vec!["--d-head", huge],
        vec!["--vocab", huge],
        vec!["--n-ctx", huge],
        vec!["--heads", wrap, "--d-head", wrap],
        vec!["--d-model", wrap, "--d-mlp", wrap],
        vec!["--subjects", "60000", "--relations", "60000"],
    ] {
        let mut args = vec!["train-facts", "-o", s(&out), "--steps", "1"];
        args.extend(&extra);
        let o = microlens_within(&args, Duration::from_secs(30));
        one_line_error(&o, "GiB");
        assert!(!out.exists(), "{extra:?}");
    }
    for extra in [
        ["--heads", "0"],
        ["--d-head", "0"],
        ["--n-ctx", "2"],
        ["--layers", "0"],
        ["--vocab", "3"],
    ] {
        let mut args = vec!["train-facts", "-o", s(&out), "--steps", "1"];
        args.extend(extra);
        let o = microlens_within(&args, Duration::from_secs(30));
        one_line_error(&o, &extra[0][2..]);
        assert!(!out.exists(), "{extra:?}");
    }
}

/// A `.pth` zip holding `pickle` as its `data.pkl`.
fn pth_with(dir: &Path, pickle: &[u8]) -> PathBuf {
    use std::io::Write;
    let path = dir.join("model.pth");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    zip.start_file("archive/data.pkl", opts).unwrap();
    zip.write_all(pickle).unwrap();
    zip.finish().unwrap();
    write(
        dir,
        "config.json",
        &std::fs::read(fixture("attn_only_2l").join("config.json")).unwrap(),
    );
    path
}

#[test]
fn third07_hostile_pickles_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.mlb");
    // 300,000 nested tuples: `((((...),),),)`.
    let mut deep = vec![0x80, 2, b')'];
    deep.extend(std::iter::repeat_n(0x85, 300_000));
    deep.push(b'.');
    let pth = pth_with(dir.path(), &deep);
    one_line_error(&microlens(&["convert", s(&pth), "-o", s(&out)]), "deep");
    // The same through MARK ... TUPLE, and lists through APPEND.
    let mut marks = vec![0x80, 2];
    marks.extend(std::iter::repeat_n(b'(', 300_000));
    marks.extend(std::iter::repeat_n(b't', 300_000));
    marks.push(b'.');
    let pth = pth_with(dir.path(), &marks);
    one_line_error(&microlens(&["convert", s(&pth), "-o", s(&out)]), "deep");
    // A memo doubling an object 64 times ("billion laughs"): 2^64 objects once copied out.
    let mut laughs = vec![0x80, 2, b')', b'q', 0];
    for _ in 0..64 {
        laughs.extend([b'h', 0, b'h', 0, 0x86, b'q', 0]);
    }
    laughs.push(b'.');
    let pth = pth_with(dir.path(), &laughs);
    one_line_error(&microlens(&["convert", s(&pth), "-o", s(&out)]), "objects");
    assert!(!out.exists());
}

#[test]
fn third08_text_inputs_are_bounded_by_size() {
    let dir = tempfile::tempdir().unwrap();
    let (ck, cf) = fixture_copy(dir.path());
    let out = dir.path().join("x.mlb");
    // A config padded to 2 MiB: configs are a few kilobytes.
    let mut padded = std::fs::read(&cf).unwrap();
    padded.resize(2 << 20, b' ');
    let big = write(dir.path(), "big.json", &padded);
    one_line_error(
        &microlens(&["convert", s(&ck), "--config", s(&big), "-o", s(&out)]),
        "MiB",
    );
    assert!(!out.exists());
    // Facts and token files of 65 MiB.
    let huge = dir.path().join("huge.txt");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(65 << 20)
        .unwrap();
    let facts = facts_blob(dir.path());
    let o = microlens(&[
        "edit",
        s(&facts),
        "--facts",
        s(&huge),
        "--no-quantise",
        "-o",
        s(&out),
    ]);
    one_line_error(&o, "MiB");
    let attn = fixture_blob(dir.path());
    let o = microlens(&["fidelity", s(&attn), s(&attn), "--tokens", s(&huge)]);
    one_line_error(&o, "MiB");
    assert!(!out.exists());
}

#[test]
fn third09_errors_quote_a_long_argument_briefly() {
    let dir = tempfile::tempdir().unwrap();
    let blob = fixture_blob(dir.path());
    let b = s(&blob);
    let cache = dir.path().join("c.st");
    let long_word = "x".repeat(130_000);
    let long_number = "9".repeat(130_000);
    let long_regex = "(".repeat(130_000);
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", b, "--tokens", &long_word],
        vec!["run", b, "--tokens", &long_number],
        vec![
            "run",
            b,
            "--tokens",
            "1",
            "--cache",
            s(&cache),
            "--names",
            &long_regex,
        ],
        vec!["circuits", b, "--sequences", &long_number],
        vec!["trace", b, "--prompt", "1,2", "--subject", &long_word],
        vec![
            "patch",
            b,
            "--clean",
            &long_word,
            "--corrupt",
            "1",
            "--answer",
            "1",
            "--wrong",
            "2",
        ],
    ];
    for args in cases {
        let o = microlens(&args);
        let err = text(&o.stderr);
        assert!(
            !o.status.success() && o.status.code() != Some(101),
            "{:?}",
            o.status
        );
        assert_eq!(err.trim_end().lines().count(), 1);
        assert!(
            err.len() < 400,
            "{} bytes of stderr for {}",
            err.len(),
            &args[..3].join(" ")
        );
    }
}

#[test]
fn third10_fidelity_plots_never_land_on_its_candidate_or_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let reference = fixture_blob(dir.path());
    let candidate = write(dir.path(), "cand.mlb", &std::fs::read(&reference).unwrap());
    let tokens = write(dir.path(), "t.tokens", b"1,2,3,4\n5,6,7,8\n");
    for (i, (input, png)) in [(&candidate, "heads.png"), (&tokens, "composition.png")]
        .into_iter()
        .enumerate()
    {
        let before = std::fs::read(input).unwrap();
        let plot = dir.path().join(format!("plot-{i}"));
        std::fs::create_dir(&plot).unwrap();
        std::os::unix::fs::symlink(input, plot.join(png)).unwrap();
        let o = microlens(&[
            "fidelity",
            s(&reference),
            s(&candidate),
            "--tokens",
            s(&tokens),
            "--plot",
            s(&plot),
        ]);
        one_line_error(&o, "input");
        assert_eq!(
            std::fs::read(input).unwrap(),
            before,
            "{png} destroyed {input:?}"
        );
    }
}

/// A `tokenizer.json` broken inside its `decoder` (the `tokenizers` crate panics on that part's syntax
/// errors, found by the `tokenizer_json` fuzz target): a one-line error naming the file.
#[test]
fn third11_a_broken_tokenizer_json_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let blob = fixture_blob(dir.path());
    let good = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tokenizer/tokenizer.json"),
    )
    .unwrap();
    let at = good.find("\"decoder\"").expect("the fixture has a decoder");
    let broken = format!("{}\"decoder\": {{\"type\" \"ByteLevel\"}}}}", &good[..at]);
    let tok = write(dir.path(), "tokenizer.json", broken.as_bytes());
    let o = microlens(&["run", s(&blob), "--tokenizer", s(&tok), "--text", "ab"]);
    one_line_error(&o, "not a HuggingFace tokenizer.json");
}
