//! Clippy inside `cargo xtask test`'s own builds: the workspace's crates are compiled by
//! `clippy-driver` (cargo's `RUSTC_WORKSPACE_WRAPPER`, as `cargo clippy` does it) with warnings denied,
//! so the test build both lints and compiles them, and no separate check build of the dependencies is
//! made. Dependencies are compiled by plain rustc, and the firmware (its own workspace) never sees the
//! wrapper: the driver turns MIR optimisations off, which would change the firmware's instruction
//! counts (the host's numerics do not depend on them).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};

/// The clippy driver every root-workspace build of this process runs, once [`enable`] found it.
static DRIVER: OnceLock<PathBuf> = OnceLock::new();

/// `clippy-driver`'s arguments, as `cargo clippy -- -D warnings` passes them.
const CLIPPY_ARGS: &str = "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__";

/// Finds the toolchain's `clippy-driver` (beside its `rustc`) and lints every later [`apply`]d build.
pub fn enable() -> Result<()> {
    let out = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .context("running rustc --print sysroot")?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let driver = sysroot.join("bin/clippy-driver");
    if !driver.is_file() {
        bail!(
            "{} is missing: clippy is not installed (`rustup component add clippy`)",
            driver.display()
        );
    }
    let _ = DRIVER.set(driver);
    Ok(())
}

/// Has `cmd` (a cargo command in the host workspace) compile the workspace's crates with clippy, if
/// [`enable`]d.
pub fn apply(cmd: &mut Command) -> &mut Command {
    if let Some(driver) = DRIVER.get() {
        cmd.env("RUSTC_WORKSPACE_WRAPPER", driver)
            .env("CLIPPY_ARGS", CLIPPY_ARGS);
    }
    cmd
}
