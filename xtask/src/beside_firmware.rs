//! The steps `cargo xtask test` runs beside the firmware steps, whose fat-LTO builds and QEMU runs keep
//! one core busy: the host-side steps that need no firmware (the Python package, the shipped model's
//! reproduction, the browser pages, the slowest tests) run one after the other in a second `xtask
//! test` process on the other core, its output in `target/xtask-beside-firmware.log`; a step at the
//! end waits for it and reports its steps. `cargo xtask test --only TEXT` runs them in place.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

use crate::paths::{cargo, root, workspace_target_dir};
use crate::toolchain::run_status;

/// The slow tests: `(test target, test names)`.
pub const SLOW_TESTS: (&str, [&str; 2]) = (
    "suite",
    [
        "fidelity_fixtures::measured_fidelity_does_not_regress",
        "fidelity_fixtures::w8a16_fidelity_does_not_regress",
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

/// Runs [`SLOW_TESTS`] straight from their executable, one test and one thread at a time (their
/// figures do not depend on the thread count).
pub fn slow_tests() -> Result<()> {
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
    run_status(
        Command::new(executable)
            .current_dir(root().join("host-tools"))
            .args(names)
            .args(["--exact", "--test-threads", "1", "--nocapture"])
            .env("RAYON_NUM_THREADS", "1"),
    )
}

/// The second process, while it runs.
struct Lane {
    child: Child,
    log: PathBuf,
}

static LANE: Mutex<Option<Lane>> = Mutex::new(None);

/// The log of the second process.
fn log_path() -> PathBuf {
    workspace_target_dir().join("xtask-beside-firmware.log")
}

/// Starts `xtask test --step NAME ...` for the `steps` named, its output going to [`log_path`].
pub fn start(steps: &[String]) -> Result<()> {
    let log = log_path();
    let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let exe = std::env::current_exe().context("the xtask executable")?;
    let mut cmd = Command::new(exe);
    cmd.current_dir(root()).arg("test");
    for step in steps {
        cmd.arg("--step").arg(step);
    }
    let child = cmd
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .context("starting the steps beside the firmware")?;
    eprintln!(
        "xtask: {} steps beside the firmware steps, in a second process ({})",
        steps.len(),
        log.display()
    );
    *LANE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Lane { child, log });
    Ok(())
}

/// Waits for the second process: its steps' summary lines, and the end of its log when one failed.
/// `Ok` when it was not started.
pub fn wait() -> Result<()> {
    let Some(mut lane) = LANE.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return Ok(());
    };
    let started = Instant::now();
    let status = lane
        .child
        .wait()
        .context("waiting for the second process")?;
    let text = std::fs::read_to_string(&lane.log).unwrap_or_default();
    for line in text.lines() {
        if line.starts_with("=== ") && line.contains(" done in ") || line.starts_with("steps: ") {
            println!("beside the firmware: {line}");
        }
    }
    eprintln!(
        "xtask: the steps beside the firmware ended (waited {:.0} s; their output: {})",
        started.elapsed().as_secs_f64(),
        lane.log.display()
    );
    if !status.success() {
        eprintln!("{}", crate::background::log_tail(&lane.log, 80));
        let failed = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("failed steps: "))
            .unwrap_or("(see the log)");
        bail!("beside the firmware, failed: {failed} ({status})");
    }
    Ok(())
}
