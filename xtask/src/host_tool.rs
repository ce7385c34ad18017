//! The host tool `microlens` (crate `microlens-host`), built in the workspace's own target directory.

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::Result;

use crate::paths::{cargo, workspace_target_dir};
use crate::toolchain::run_status;

/// Builds `microlens` with the `test` profile (optimised, like release) and returns its path: the same
/// artifacts `cargo test` builds, so CI compiles the host crates (and candle) once.
pub fn build() -> Result<PathBuf> {
    build_package("test", "microlens-host", "microlens")
}

/// `cargo build --profile test -p P ...` of the workspace `packages` (artifacts in `target/debug`), once
/// per process: a later call with the same packages finds them built (the sources do not change during
/// a command), so the steps that run beside another process's builds do not wait on cargo's lock.
pub fn build_test_profile(packages: &[&str]) -> Result<()> {
    build_profile("test", packages)
}

/// Builds the workspace package `package` with the workspace's cargo profile `profile` (once per
/// process, [`build_test_profile`]) and returns the path of its binary `bin`: in `target/debug` for
/// `dev` and `test`, in the profile's own directory for the others.
pub fn build_package(profile: &str, package: &str, bin: &str) -> Result<PathBuf> {
    build_profile(profile, &[package])?;
    let dir = match profile {
        "dev" | "test" => "debug",
        custom => custom,
    };
    Ok(workspace_target_dir().join(dir).join(bin))
}

/// `cargo build --profile PROFILE -p P ...`, once per process and profile (see [`build_test_profile`]).
fn build_profile(profile: &str, packages: &[&str]) -> Result<()> {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let key = format!("{profile} -p {}", packages.join(" -p "));
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if built.contains(&key) {
        return Ok(());
    }
    eprintln!("xtask: cargo build --profile {key}");
    let mut cmd = cargo();
    cmd.args(["build", "--profile", profile]);
    packages.iter().for_each(|p| {
        cmd.args(["-p", p]);
    });
    run_status(&mut cmd)?;
    built.push(key);
    Ok(())
}
