//! `cargo xtask test`'s Python step: the `microlens` package (`bindings/python`) built with the test
//! profile in the workspace's target directory (sharing every compiled dependency with `cargo test`),
//! staged beside its Python half, and its pytest suite run in a virtual environment xtask makes
//! (`target/python-venv`: numpy, pytest and maturin from PyPI; maturin checks the package's source
//! distribution, from which `pip install ./bindings/python` builds the release wheel). The serve check
//! runs its device tests (`tests/test_device.py`) the same way against the serve firmware on QEMU.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::paths::{on_path, root, workspace_target_dir};
use crate::toolchain::{ensure_packages, run_status, Package};

/// What the virtual environment installs from PyPI.
const REQUIREMENTS: [&str; 3] = ["numpy>=1.21", "pytest>=7", "maturin>=1.16,<2"];

/// Debian's `venv` module for the system Python (a fresh machine may lack it).
const PYTHON_VENV: Package = Package {
    name: "python3-venv",
    present: || {
        on_path("python3")
            && Command::new("python3")
                .args(["-c", "import venv, ensurepip"])
                .output()
                .is_ok_and(|o| o.status.success())
    },
};

/// The virtual environment's Python, made (and its packages installed) if missing.
fn venv() -> Result<PathBuf> {
    let dir = workspace_target_dir().join("python-venv");
    let python = dir.join("bin/python");
    let ready = dir.join(".microlens-ready");
    if ready.is_file() {
        return Ok(python);
    }
    ensure_packages(&[PYTHON_VENV])?;
    run_status(Command::new("python3").args(["-m", "venv"]).arg(&dir))?;
    run_status(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(REQUIREMENTS),
    )?;
    fs::write(&ready, REQUIREMENTS.join("\n"))?;
    Ok(python)
}

/// What the Python step and the serve step's device tests both need made first, by the process that
/// starts the steps beside the firmware: the venv.
pub fn prepare() -> Result<()> {
    venv().map(|_| ())
}

/// Builds the extension (and the host tool the tests run) with the test profile.
fn build() -> Result<()> {
    crate::host_tool::build_test_profile(&["microlens-python", "microlens-host"])
}

/// Builds the extension and stages the package in `target/<dir>/microlens`: its Python files and the
/// extension as `_native.abi3.so`. Returns the staging directory. Each user stages in a `dir` of its
/// own (the Python step and the serve step's device tests run at once).
pub fn stage(dir: &str) -> Result<PathBuf> {
    build()?;
    let staging = workspace_target_dir().join(dir);
    let package = staging.join("microlens");
    let _ = fs::remove_dir_all(&package);
    fs::create_dir_all(&package)?;
    let source = root().join("bindings/python/python/microlens");
    for entry in fs::read_dir(&source).with_context(|| source.display().to_string())? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "py") {
            copy(&path, &package.join(path.file_name().unwrap_or_default()))?;
        }
    }
    let built = workspace_target_dir().join("debug/lib_native.so");
    copy(&built, &package.join("_native.abi3.so"))?;
    Ok(staging)
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    fs::copy(from, to)
        .map(|_| ())
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))
}

/// The step: the venv, the staged package, maturin's source distribution, then pytest.
pub fn test() -> Result<()> {
    let python = venv()?;
    let staging = stage("python")?;
    let bin = python.with_file_name("maturin");
    run_status(
        Command::new(bin)
            .current_dir(root())
            .args([
                "sdist",
                "--manifest-path",
                "bindings/python/Cargo.toml",
                "--out",
            ])
            .arg(workspace_target_dir().join("python-sdist")),
    )?;
    let tool = workspace_target_dir().join("debug/microlens");
    run_status(&mut pytest(
        &python,
        &staging,
        &tool,
        "bindings/python/tests",
    ))
}

/// `pytest TESTS` of the staged package in the venv, `tool` as the `microlens` command.
fn pytest(python: &Path, staging: &Path, tool: &Path, tests: &str) -> Command {
    let mut cmd = Command::new(python);
    cmd.current_dir(root())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", tests])
        .env("PYTHONPATH", staging)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("MICROLENS_BIN", tool);
    cmd
}

/// `bindings/python/tests/test_device.py` against the device at `port` (`tcp:HOST:PORT`) serving
/// `blob`: `microlens.Device` equal to `microlens.Model` of the blob (the venv and the staged package
/// made as the Python step makes them; `tool` is the `microlens` command).
pub fn device_tests(port: &str, blob: &Path, tool: &Path) -> Result<()> {
    let python = venv()?;
    let staging = stage("python-device")?;
    let mut cmd = pytest(
        &python,
        &staging,
        tool,
        "bindings/python/tests/test_device.py",
    );
    run_status(
        cmd.arg("-rs")
            .env("MICROLENS_DEVICE", port)
            .env("MICROLENS_DEVICE_BLOB", blob),
    )
}
