//! What `cargo xtask test` runs on a thread of its own beside the firmware steps, whose fat-LTO builds
//! and QEMU runs keep one core busy: clippy, then the slowest tests (the fidelity regressions, which
//! quantise every model in every build with GPTQ), one after the other on the other core. A step at the
//! end waits for them ([`wait`]); the workspace-tests step skips those tests ([`SLOW_TESTS`]).

use std::path::PathBuf;
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};

use crate::background::{self, logged};
use crate::paths::{cargo, root, workspace_target_dir};
use crate::toolchain::run_status;

/// The background job's name.
const BACKGROUND: &str = "clippy and the slow tests, beside the firmware steps";

/// The slow tests: `(test target, test names)`.
pub const SLOW_TESTS: (&str, [&str; 2]) = (
    "fidelity_fixtures",
    [
        "measured_fidelity_does_not_regress",
        "w8a16_fidelity_does_not_regress",
    ],
);

/// `cargo test`'s arguments after `--` that skip [`SLOW_TESTS`].
pub fn skip_slow_tests() -> Vec<String> {
    SLOW_TESTS
        .1
        .iter()
        .flat_map(|name| ["--skip".to_owned(), (*name).to_owned()])
        .collect()
}

/// `cargo clippy --workspace --all-targets -- -D warnings` with one job (the other core) and its own
/// target directory (check builds share nothing with the test build, and the steps' `cargo build`s
/// never wait on its lock); the dependencies' proc macros and build scripts, which a check build
/// compiles, without optimisation.
fn clippy() -> Command {
    let mut c = cargo();
    c.args(["clippy", "--workspace", "--all-targets", "-j", "1"])
        .args(["--config", "profile.dev.package.\"*\".opt-level=0"])
        .arg("--target-dir")
        .arg(workspace_target_dir().join("clippy"))
        .args(["--", "-D", "warnings"]);
    c
}

/// The executable of the workspace's test target `name`, as `cargo test` built it (built now if
/// not).
fn test_executable(name: &str) -> Result<PathBuf> {
    let out = cargo()
        .args(["test", "--no-run", "--message-format=json", "--test", name])
        .output()
        .context("running cargo test --no-run")?;
    if !out.status.success() {
        bail!(
            "cargo test --no-run --test {name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|m| m["target"]["name"] == name && m["executable"].is_string())
        .and_then(|m| m["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| anyhow!("cargo built no executable for the test target {name}"))
}

/// [`SLOW_TESTS`] run straight from their executable (no cargo, so no lock on the target directory),
/// one test and one thread at a time (their figures do not depend on the thread count).
fn slow_tests() -> Result<Command> {
    let (target, names) = SLOW_TESTS;
    let executable = test_executable(target)?;
    // Both names must be tests there: a renamed test would otherwise be neither skipped nor run.
    let listed = Command::new(&executable)
        .arg("--list")
        .output()
        .context("listing the slow tests")?;
    let listed = String::from_utf8_lossy(&listed.stdout);
    for name in names {
        if !listed.lines().any(|l| l == format!("{name}: test")) {
            bail!("{target} has no test {name} (xtask/src/beside_firmware.rs names it)");
        }
    }
    let mut c = Command::new(executable);
    c.current_dir(root().join("host-tools"))
        .args(names)
        .args(["--exact", "--test-threads", "1", "--nocapture"])
        .env("RAYON_NUM_THREADS", "1");
    Ok(c)
}

/// Starts clippy, then the slow tests, on a thread of their own (output in
/// `target/xtask-beside-firmware.log`).
pub fn start() -> Result<()> {
    let (mut clippy, mut tests) = (clippy(), slow_tests()?);
    let log = workspace_target_dir().join("xtask-beside-firmware.log");
    background::start(BACKGROUND, log, move |file| {
        let linted = run_status(logged(&mut clippy, Some(file))?).context("clippy");
        let tested = run_status(logged(&mut tests, Some(file))?).context("the slow tests");
        match (linted, tested) {
            (Ok(()), Ok(())) => Ok(()),
            (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
            (Err(a), Err(b)) => Err(anyhow!("{a:#}; {b:#}")),
        }
    })
}

/// The outcome of [`start`]'s work: clippy's diagnostics or the failing tests when it failed.
pub fn wait() -> Result<()> {
    background::wait(BACKGROUND)
}
