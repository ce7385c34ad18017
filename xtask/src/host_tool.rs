//! The host tool `microlens` (crate `microlens-host`), built in the workspace's own target directory.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Result;

use crate::paths::{root, workspace_target_dir};
use crate::toolchain::run_status;

/// Builds `microlens` with the `test` profile (optimised, like release) and returns its path: the same
/// artifacts `cargo test` builds, so CI compiles the host crates (and candle) once.
pub fn build() -> Result<PathBuf> {
    build_package("microlens-host", "microlens")
}

/// Builds the workspace package `package` with the `test` profile and returns the path of its binary
/// `bin`.
pub fn build_package(package: &str, bin: &str) -> Result<PathBuf> {
    build_test_profile(&[package])?;
    Ok(workspace_target_dir().join("debug").join(bin))
}

/// `cargo build --profile test -p P ...` of the workspace `packages` (artifacts in `target/debug`).
pub fn build_test_profile(packages: &[&str]) -> Result<()> {
    eprintln!(
        "xtask: cargo build --profile test -p {}",
        packages.join(" -p ")
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root()).args(["build", "--profile", "test"]);
    packages.iter().for_each(|p| {
        cmd.args(["-p", p]);
    });
    run_status(&mut cmd)
}
