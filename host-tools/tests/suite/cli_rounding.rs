//! `microlens convert --rounding`: GPTQ is the default for i8/i4, deterministic for a seed, and bad
//! calibration input is a one-line error that writes nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use microlens::{Activations, DType, Model};
use microlens_host::quantize::requantize_nearest;

fn checkpoint() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/gpt2_like/model.safetensors")
}

fn convert(out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_microlens"))
        .arg("convert")
        .arg(checkpoint())
        .arg("-o")
        .arg(out)
        .args(extra)
        .output()
        .expect("microlens runs")
}

fn converted(dir: &Path, name: &str, extra: &[&str]) -> Vec<u8> {
    let out = dir.join(name);
    let o = convert(&out, extra);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read(out).unwrap()
}

/// Fails with one line on stderr that mentions `mentions`, and writes nothing.
fn refused(dir: &Path, extra: &[&str], mentions: &str) {
    let out = dir.join("refused.mlb");
    let o = convert(&out, extra);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{extra:?} succeeded");
    assert_eq!(err.trim_end().lines().count(), 1, "stderr: {err}");
    assert!(
        err.contains(mentions),
        "{err:?} does not mention {mentions:?}"
    );
    assert!(!out.exists());
}

#[test]
fn gptq_is_the_default_and_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let f32_blob = converted(d, "f32.mlb", &[]);
    for dtype in ["i8", "i4", "i8g"] {
        let gptq = converted(d, "a.mlb", &["--dtype", dtype]);
        assert_eq!(
            gptq,
            converted(d, "b.mlb", &["--dtype", dtype, "--rounding", "gptq"])
        );
        let seeded = ["--dtype", dtype, "--calibration-seed", "1"];
        assert_eq!(
            gptq,
            converted(d, "c.mlb", &seeded),
            "seed 1 is the default"
        );
        let other = converted(d, "d.mlb", &["--dtype", dtype, "--calibration-seed", "2"]);
        assert_ne!(gptq, other, "another seed calibrates on other sequences");
        assert_eq!(other.len(), gptq.len());
        let plain = converted(
            d,
            "f.mlb",
            &["--dtype", dtype, "--calibration-inputs", "float"],
        );
        assert_ne!(gptq, plain);
        let nearest = converted(d, "e.mlb", &["--dtype", dtype, "--rounding", "nearest"]);
        assert_ne!(gptq, nearest);
        let dt = *DType::ALL.iter().find(|t| t.name() == dtype).unwrap();
        let model = Model::from_bytes(&f32_blob).unwrap();
        assert_eq!(
            nearest,
            requantize_nearest(&model, dt, Activations::I8).unwrap()
        );
    }
    // f16 is rounded by GPTQ too by default; f32 has nothing to round: gptq changes nothing.
    let f16 = converted(d, "f16.mlb", &["--dtype", "f16"]);
    assert_eq!(
        f16,
        converted(d, "g.mlb", &["--dtype", "f16", "--rounding", "gptq"])
    );
    let f16_nearest = converted(d, "h.mlb", &["--dtype", "f16", "--rounding", "nearest"]);
    assert_ne!(f16, f16_nearest);
    assert_eq!(f16.len(), f16_nearest.len());
    let model = Model::from_bytes(&f32_blob).unwrap();
    assert_eq!(
        f16_nearest,
        requantize_nearest(&model, DType::F16, Activations::F32).unwrap()
    );
    assert_eq!(
        f32_blob,
        converted(d, "i.mlb", &["--dtype", "f32", "--rounding", "gptq"])
    );
}

#[test]
fn calibration_tokens_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens = d.join("tokens.txt");
    std::fs::write(&tokens, "1,2,3,4,1,2,3,4\n5,6,7,5,6,7,5,6,7\n").unwrap();
    let t = tokens.to_str().unwrap();
    let a = converted(d, "a.mlb", &["--dtype", "i8", "--calibration-tokens", t]);
    assert_eq!(
        a,
        converted(d, "b.mlb", &["--dtype", "i8", "--calibration-tokens", t])
    );
    assert_ne!(a, converted(d, "c.mlb", &["--dtype", "i8"]));
}

#[test]
fn bad_calibration_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = |name: &str, text: &str| {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let range = file("range.txt", "1,2,3\n4,999,5\n");
    refused(
        d,
        &["--dtype", "i8", "--calibration-tokens", &range],
        "range.txt:2",
    );
    let junk = file("junk.txt", "1,two,3\n");
    refused(
        d,
        &["--dtype", "i4", "--calibration-tokens", &junk],
        "junk.txt:1",
    );
    let empty = file("empty.txt", "\n");
    refused(
        d,
        &["--dtype", "i8", "--calibration-tokens", &empty],
        "no token sequence",
    );
    let long = file("long.txt", &format!("{}1\n", "1,".repeat(40)));
    refused(
        d,
        &["--dtype", "i8", "--calibration-tokens", &long],
        "n_ctx",
    );
    let missing = d.join("absent.txt");
    let missing = missing.to_str().unwrap();
    refused(
        d,
        &["--dtype", "i8", "--calibration-tokens", missing],
        "absent.txt",
    );
    refused(
        d,
        &["--dtype", "i8", "--calibration-sequences", "0"],
        "at least one",
    );
    refused(
        d,
        &["--dtype", "i8", "--rounding", "best"],
        "invalid value 'best' for '--rounding <ROUNDING>' [possible values: nearest, gptq]",
    );
    refused(
        d,
        &["--dtype", "i5"],
        "invalid value 'i5' for '--dtype <DTYPE>' [possible values: f32, f16, i8, i4, i8g]",
    );
    refused(
        d,
        &["--dtype", "f32", "--calibration-seed", "3"],
        "--rounding gptq",
    );
    refused(
        d,
        &[
            "--dtype",
            "i8",
            "--rounding",
            "nearest",
            "--calibration-seed",
            "3",
        ],
        "--rounding gptq",
    );
    refused(
        d,
        &["--dtype", "i8", "--calibration-inputs", "fp8"],
        "[possible values: float, quantized]",
    );
    refused(
        d,
        &[
            "--dtype",
            "i8",
            "--calibration-tokens",
            &range,
            "--calibration-seed",
            "2",
        ],
        "replaces",
    );
}

/// `--activations` and `--kv` write the arithmetic they name into the blob (W8A16, its int16 KV cache,
/// int8 weights with float activations); the pairs the core cannot run are refused.
#[test]
fn activations_and_kv_options() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: [(&[&str], Activations); 4] = [
        (&["--dtype", "i8"], Activations::I8),
        (&["--dtype", "i8", "--activations", "i16"], Activations::I16),
        (
            &["--dtype", "i8", "--activations", "i16", "--kv", "i16"],
            Activations::I16Kv16,
        ),
        (&["--dtype", "i4", "--activations", "f32"], Activations::F32),
    ];
    for (extra, want) in cases {
        let args: Vec<&str> = extra
            .iter()
            .copied()
            .chain(["--rounding", "nearest"])
            .collect();
        let blob = converted(d, "w.mlb", &args);
        assert_eq!(
            Model::from_bytes(&blob).unwrap().activations(),
            want,
            "{extra:?}"
        );
    }
    refused(
        d,
        &["--activations", "i16"],
        "i16 activations need i8 or i4 matrices, not f32",
    );
    refused(
        d,
        &["--dtype", "i8", "--kv", "i16"],
        "--kv needs --activations i16",
    );
    refused(
        d,
        &["--dtype", "i8", "--activations", "i16", "--kv", "i4"],
        "invalid value 'i4' for '--kv <KV>'",
    );
}

/// `--tables f16` keeps a W8A16 model's lookup tables in f16 and its other matrices int8, rounded to
/// nearest or with GPTQ; any other model refuses it.
#[test]
fn tables_option() {
    use microlens::{TensorId, TensorKind};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for rounding in ["nearest", "gptq"] {
        let args = [
            "--dtype",
            "i8",
            "--activations",
            "i16",
            "--tables",
            "f16",
            "--rounding",
            rounding,
        ];
        let blob = converted(d, "t.mlb", &args);
        let model = Model::from_bytes(&blob).unwrap();
        let dtype = |kind| model.entry(TensorId::global(kind)).unwrap().dtype;
        assert_eq!(dtype(TensorKind::WE), DType::F16, "{rounding}");
        assert_eq!(dtype(TensorKind::WPos), DType::F16, "{rounding}");
        assert_eq!(dtype(TensorKind::WU), DType::I8, "{rounding}");
        let w_q = model.entry(TensorId::layer(TensorKind::WQ, 0)).unwrap();
        assert_eq!(w_q.dtype, DType::I8, "{rounding}");
        let int8 = converted(d, "u.mlb", &[&args[..4], &args[6..]].concat());
        assert!(blob.len() > int8.len());
    }
    refused(
        d,
        &["--dtype", "i8", "--tables", "f16"],
        "--tables f16 needs --dtype i8 or i8g with --activations i16",
    );
}
