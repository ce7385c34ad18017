//! `cargo xtask fuzz [--seconds N | --runs N] [--target T]`: coverage-guided fuzzing of the blob reader, the forward
//! pass and the host's parsers with cargo-fuzz (libFuzzer), on the stable toolchain.
//!
//! cargo-fuzz needs nightly flags (`-Zsanitizer`, `-Cpasses=sancov-module`): `RUSTC_BOOTSTRAP=1` lets the
//! stable compiler take them; `-s none` builds without AddressSanitizer (safe Rust; cargo-fuzz keeps
//! overflow checks and debug assertions on), feature `libfuzzer`, into `fuzz/target/`. cargo-fuzz is
//! installed with `cargo install` when missing. The seed corpus is made here, never committed: every
//! fixture and the shipped model converted to every dtype (`fuzz/corpus/`), plus their checkpoints,
//! configs, tokenizers, token lists and frames for the parsers.
//!
//! [`replay`] (a `cargo xtask test` step) runs the targets uninstrumented on that corpus and mutations
//! of it, in the workspace's test build: no second build of the host crates.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::paths::root;
use crate::toolchain::run_status;

/// The fuzz targets: the libFuzzer binaries' names (`fuzz/fuzz_targets/*.rs`, one per module of
/// `microlens_fuzz::targets`), sorted.
fn targets() -> Result<Vec<String>> {
    let dir = fuzz_dir().join("fuzz_targets");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "rs") {
            if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                names.push(stem.to_owned());
            }
        }
    }
    names.sort();
    Ok(names)
}

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Seconds per target (60 unless `--runs` is given).
    #[arg(long)]
    pub seconds: Option<u64>,
    /// Executions per target (libFuzzer `-runs`): a campaign that stops at a count, in-process only.
    #[arg(long, conflicts_with = "jobs")]
    pub runs: Option<u64>,
    /// Only this target (default: all).
    #[arg(long)]
    pub target: Option<String>,
    /// Parallel fuzzing jobs per target (libFuzzer `-fork`); 1 runs in-process.
    #[arg(long, default_value_t = 1)]
    pub jobs: u32,
}

fn fuzz_dir() -> PathBuf {
    root().join("fuzz")
}

/// cargo with `RUSTC_BOOTSTRAP=1` (cargo-fuzz's nightly flags).
fn cargo() -> Command {
    let mut c = crate::paths::cargo();
    c.env("RUSTC_BOOTSTRAP", "1");
    c
}

/// Installs cargo-fuzz with `cargo install` unless `cargo fuzz` already runs.
fn ensure_cargo_fuzz() -> Result<()> {
    let installed = cargo()
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("xtask: cargo install cargo-fuzz --locked");
        run_status(cargo().args(["install", "cargo-fuzz", "--locked"]))?;
    }
    Ok(())
}

/// What `cargo fuzz build` and `cargo fuzz run` share: no sanitizer, the libFuzzer binaries, their own
/// target directory.
fn cargo_fuzz(subcommand: &str) -> Command {
    let mut c = cargo();
    c.current_dir(fuzz_dir())
        .args(["fuzz", subcommand, "-s", "none", "--features", "libfuzzer"])
        .arg("--target-dir")
        .arg(fuzz_dir().join("target"));
    c
}

/// Installs cargo-fuzz if needed and builds every target, instrumented, in one cargo invocation.
fn build_all() -> Result<()> {
    ensure_cargo_fuzz()?;
    eprintln!("xtask: cargo fuzz build -s none --features libfuzzer (RUSTC_BOOTSTRAP=1)");
    run_status(&mut cargo_fuzz("build"))
}

/// Mutants per seed in [`replay`].
const REPLAY_MUTANTS: u32 = 200;

/// Every target on the seed corpus and [`REPLAY_MUTANTS`] mutants of each seed, uninstrumented
/// (`fuzz/tests/replay.rs` in the workspace's test build).
pub fn replay() -> Result<()> {
    make_seeds()?;
    // The workspace's cargo test as the workspace-tests step runs it (no RUSTC_BOOTSTRAP: the same
    // build, nothing recompiled).
    run_status(
        crate::paths::cargo()
            .args(["test", "--test", "replay", "--", "--nocapture"])
            .env("MICROLENS_FUZZ_CORPUS", fuzz_dir().join("corpus"))
            .env("MICROLENS_FUZZ_MUTANTS", REPLAY_MUTANTS.to_string()),
    )
}

/// Fixtures and the shipped model: `(name, checkpoint)`.
fn checkpoints() -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let fixtures = root().join("tests/fixtures");
    for entry in std::fs::read_dir(&fixtures).context("reading tests/fixtures")? {
        let dir = entry?.path();
        let ckpt = dir.join("model.safetensors");
        if ckpt.is_file() {
            let name = dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            out.push((name, ckpt));
        }
    }
    out.sort();
    out.push((
        "shipped".into(),
        root().join("firmware-example/model/induction-2l.safetensors"),
    ));
    Ok(out)
}

/// Writes `bytes` into `corpus/<target>/<name>` (the corpus directories are created).
fn seed(target: &str, name: &str, bytes: &[u8]) -> Result<()> {
    let dir = fuzz_dir().join("corpus").join(target);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join(name), bytes).with_context(|| format!("writing seed {name}"))
}

/// The seed corpus: every checkpoint converted to every dtype (with nearest rounding, which is quick),
/// for both blob targets; the checkpoints, `.pth` files, configs and token lists for the host parsers.
/// The vocabulary of the fixture `tokenizer.bin` (`tests/fixtures/llama2c_tokenizer`).
const LLAMA2C_TOKENIZER_VOCAB: u16 = 448;

fn make_seeds() -> Result<()> {
    let microlens = crate::host_tool::build()?;
    let tmp = fuzz_dir().join("target").join("seed-blobs");
    std::fs::create_dir_all(&tmp)?;
    for (name, ckpt) in checkpoints()? {
        for dtype in ["f32", "f16", "i8", "i4"] {
            let out = tmp.join(format!("{name}-{dtype}.mlb"));
            let mut cmd = Command::new(&microlens);
            cmd.arg("convert").arg(&ckpt).arg("-o").arg(&out);
            cmd.args(["--dtype", dtype]);
            if dtype != "f32" {
                cmd.args(["--rounding", "nearest"]);
            }
            let o = cmd.output().context("running microlens convert")?;
            if !o.status.success() {
                bail!(
                    "seed {name} {dtype}: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
            }
            let bytes = std::fs::read(&out)?;
            seed("blob_bytes", &format!("{name}-{dtype}"), &bytes)?;
            seed("blob_resigned", &format!("{name}-{dtype}"), &bytes)?;
        }
        let mut st = vec![0u8];
        st.extend(std::fs::read(&ckpt)?);
        seed("host_parsers", &format!("{name}-safetensors"), &st)?;
        for config in [
            ckpt.with_file_name("config.json"),
            ckpt.with_extension("json"),
        ] {
            if let Ok(text) = std::fs::read(&config) {
                let mut c = vec![1u8];
                c.extend(text);
                seed("host_parsers", &format!("{name}-config"), &c)?;
            }
        }
        let pth = ckpt.with_extension("pth");
        if let Ok(bytes) = std::fs::read(&pth) {
            if let Some(pickle) = stored_entry(&bytes, "data.pkl") {
                seed("pth_pickle", &format!("{name}-pickle"), pickle)?;
            }
            let mut p = vec![0u8];
            p.extend(bytes);
            seed("host_parsers", &format!("{name}-pth"), &p)?;
        }
    }
    seed("host_parsers", "tokens", b"\x023,1,4,1,5\n 9 , 2,6\n\n5")?;
    // PROTO 2, EMPTY_DICT, SHORT_BINUNICODE "a", LONG1 300, SETITEM, STOP.
    seed(
        "pth_pickle",
        "dict",
        b"\x80\x02}\x8c\x01a\x8a\x02\x2c\x01s.",
    )?;
    let facts = root().join("firmware-example/model/facts-4l.facts");
    seed(
        "facts_file",
        "facts-4l",
        &std::fs::read(&facts).context("reading facts-4l.facts")?,
    )?;
    let tokenizer = root().join("tests/fixtures/tokenizer/tokenizer.json");
    let mut t = vec![11u8];
    t.extend(std::fs::read(&tokenizer).context("reading the fixture tokenizer.json")?);
    t.extend(b"Hello world");
    seed("tokenizer_json", "fixture", &t)?;
    for version in 0..3 {
        let bin = root().join(format!("tests/fixtures/hf_llama/llama2c_v{version}.bin"));
        let mut b = vec![0u8];
        b.extend(std::fs::read(&bin).context("reading a llama2.c fixture")?);
        seed("llama2c_files", &format!("v{version}"), &b)?;
    }
    let tokenizer = root().join("tests/fixtures/llama2c_tokenizer/tokenizer.bin");
    if let Ok(bytes) = std::fs::read(&tokenizer) {
        let vocab = LLAMA2C_TOKENIZER_VOCAB.to_le_bytes();
        let mut t = vec![1u8, vocab[0], vocab[1], 11];
        t.extend(bytes);
        t.extend(b"Hello world");
        seed("llama2c_files", "tokenizer", &t)?;
    }
    seed("config_writer", "empty", b"")?;
    for (name, frames) in crate::serve_frames::seeds() {
        seed("frame_decoder", name, &frames)?;
    }
    Ok(())
}

/// The bytes of the zip entry whose name ends with `suffix`, if it is stored uncompressed with its size
/// in its local header (as `torch.save` writes them).
fn stored_entry<'a>(zip: &'a [u8], suffix: &str) -> Option<&'a [u8]> {
    let u16_at = |i: usize| Some(u16::from_le_bytes(zip.get(i..i + 2)?.try_into().ok()?) as usize);
    let u32_at = |i: usize| Some(u32::from_le_bytes(zip.get(i..i + 4)?.try_into().ok()?) as usize);
    let mut at = 0;
    while zip.get(at..at + 4)? == b"PK\x03\x04" {
        let (method, size) = (u16_at(at + 8)?, u32_at(at + 18)?);
        let (name_len, extra_len) = (u16_at(at + 26)?, u16_at(at + 28)?);
        let name = zip.get(at + 30..at + 30 + name_len)?;
        let data = at + 30 + name_len + extra_len;
        if name.ends_with(suffix.as_bytes()) && method == 0 {
            return zip.get(data..data + size);
        }
        at = data + size;
    }
    None
}

/// libFuzzer's summary of a run: `(executions, seconds, coverage)` from its last lines.
fn summary(log: &str) -> (Option<u64>, Option<u64>, Option<u64>) {
    let done = log.lines().rev().find_map(|l| {
        let rest = l.strip_prefix("Done ")?;
        let mut it = rest.split_whitespace();
        let runs = it.next()?.parse().ok()?;
        let secs = it.nth(2)?.parse().ok()?;
        Some((runs, secs))
    });
    let cov = log.lines().rev().find_map(|l| {
        let at = l.find("cov: ")?;
        l[at + 5..].split_whitespace().next()?.parse().ok()
    });
    (done.map(|d| d.0), done.map(|d| d.1), cov)
}

/// How long one target runs: libFuzzer's stopping flags.
fn budget(seconds: Option<u64>, runs: Option<u64>) -> Vec<String> {
    let mut flags = Vec::new();
    if let Some(runs) = runs {
        flags.push(format!("-runs={runs}"));
    }
    match (seconds, runs) {
        (Some(s), _) => flags.push(format!("-max_total_time={s}")),
        (None, None) => flags.push("-max_total_time=60".into()),
        (None, Some(_)) => {}
    }
    flags
}

/// Runs one target within `budget`; a crash fails with libFuzzer's report.
fn run_target(target: &str, budget: &[String], jobs: u32) -> Result<()> {
    let corpus = fuzz_dir().join("corpus").join(target);
    std::fs::create_dir_all(&corpus)?;
    let started = Instant::now();
    let mut cmd = cargo_fuzz("run");
    cmd.arg(target).arg(&corpus).arg("--").args(budget).args([
        "-rss_limit_mb=4096",
        "-timeout=30",
        "-print_final_stats=1",
    ]);
    if jobs > 1 {
        cmd.arg(format!("-fork={jobs}"));
    }
    let out = cmd.output().context("running cargo fuzz")?;
    let log = String::from_utf8_lossy(&out.stderr);
    let (runs, secs, cov) = summary(&log);
    let fmt = |v: Option<u64>| v.map_or("?".into(), |v| v.to_string());
    println!(
        "fuzz {target}: {} executions in {} s ({} exec/s), coverage {} edges, corpus {} inputs, {}",
        fmt(runs),
        fmt(secs),
        match (runs, secs) {
            (Some(r), Some(s)) if s > 0 => (r / s).to_string(),
            _ => "?".into(),
        },
        fmt(cov),
        std::fs::read_dir(&corpus).map_or(0, |d| d.count()),
        if out.status.success() {
            "0 crashes"
        } else {
            "CRASH"
        }
    );
    if !out.status.success() {
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "fuzz target {target} failed after {:.0} s (artifacts in fuzz/artifacts/{target}):\n{}",
            started.elapsed().as_secs_f64(),
            tail.join("\n")
        );
    }
    Ok(())
}

/// Installs cargo-fuzz if needed, builds the targets, makes the seed corpus and runs each target for
/// `args.seconds` or `args.runs` executions.
pub fn run(args: Args) -> Result<()> {
    let all = targets()?;
    let targets: Vec<&str> = match &args.target {
        Some(t) if all.contains(t) => vec![t.as_str()],
        Some(t) => bail!("unknown fuzz target {t:?} (one of {})", all.join(", ")),
        None => all.iter().map(String::as_str).collect(),
    };
    build_all()?;
    make_seeds()?;
    let budget = budget(args.seconds, args.runs);
    let mut failed = Vec::new();
    for t in targets {
        if let Err(e) = run_target(t, &budget, args.jobs) {
            eprintln!("xtask: {e:#}");
            failed.push(t);
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("fuzz targets crashed: {}", failed.join(", "))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn libfuzzer_summary_is_read() {
        let log = "#1000\tpulse  cov: 812 ft: 2000 corp: 40/1Mb exec/s: 500\n\
                   Done 123456 runs in 31 second(s)\n";
        assert_eq!(super::summary(log), (Some(123456), Some(31), Some(812)));
    }

    #[test]
    fn a_campaign_stops_at_its_count_or_its_time() {
        assert_eq!(super::budget(None, None), ["-max_total_time=60"]);
        assert_eq!(super::budget(None, Some(10)), ["-runs=10"]);
        assert_eq!(
            super::budget(Some(5), Some(10)),
            ["-runs=10", "-max_total_time=5"]
        );
    }
}
