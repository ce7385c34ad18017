//! `cargo xtask core32`: the core crate's tests where `usize` is 32 bits (`i686-unknown-linux-gnu`, run
//! natively), so size arithmetic that could wrap on a 32-bit microcontroller is exercised on the host.
//!
//! With the rustup target installed, plain `cargo test --target`; otherwise Debian's Rust compiles the
//! standard library for i686 (`-Zbuild-std`), linked against Debian's 32-bit C library (`gcc-multilib`),
//! both installed with apt-get when missing (as for the firmware, [`crate::toolchain`]).

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use crate::background::{self, logged};
use crate::paths::{root, workspace_target_dir};
use crate::toolchain::{ensure_packages, run_status, Package, Toolchain};

/// The 32-bit host target.
pub const TARGET: &str = "i686-unknown-linux-gnu";

/// `gcc-multilib`: `gcc -m32` and the 32-bit C library to link with.
const MULTILIB: Package = Package {
    name: "gcc-multilib",
    present: || {
        Path::new("/usr/lib32/libc.so").is_file() || Path::new("/usr/lib32/crt1.o").is_file()
    },
};

/// The core tests that matter on 32-bit: sizes and hostile numbers, blob parsing, the forward pass.
const TESTS: [&str; 5] = ["hostile", "blob", "session", "quant", "properties"];

/// Builds and runs the core's tests for [`TARGET`].
pub fn run() -> Result<()> {
    run_status(&mut command()?)
}

/// [`run`] on a thread of its own ([`crate::background`]), the packages installed first, here;
/// [`wait`] waits for it.
pub fn run_in_background() -> Result<()> {
    let mut cmd = command()?;
    let log = workspace_target_dir().join("i686").join("xtask-core32.log");
    background::start(BACKGROUND, log, move |file| {
        run_status(logged(&mut cmd, Some(file))?)
    })
}

/// The result of [`run_in_background`].
pub fn wait() -> Result<()> {
    background::wait(BACKGROUND)
}

/// The background job's name.
const BACKGROUND: &str = "the core's tests on 32-bit (i686)";

/// The `cargo test` of [`run`], with the packages it needs installed.
fn command() -> Result<Command> {
    let toolchain = Toolchain::detect(TARGET, root());
    ensure_packages(toolchain.packages())?;
    ensure_packages(&[MULTILIB])?;
    eprintln!("xtask: core tests on {TARGET} ({})", toolchain.describe());
    let mut cmd = match toolchain {
        Toolchain::Rustup => {
            Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        }
        Toolchain::Debian => {
            let mut c = Command::new("/usr/bin/cargo");
            c.env("RUSTC", "/usr/bin/rustc").env("RUSTC_BOOTSTRAP", "1");
            c
        }
    };
    cmd.current_dir(root())
        .env("CARGO_TARGET_DIR", workspace_target_dir().join("i686"))
        .args([
            "test",
            "-p",
            "microlens",
            "--features",
            "std,encode",
            "--target",
            TARGET,
            "--lib",
        ]);
    for t in TESTS {
        cmd.args(["--test", t]);
    }
    if toolchain == Toolchain::Debian {
        // The standard library without its backtrace support (gimli, addr2line, object: a test's
        // panic still names its line) and, like every dependency the numerics do not run in, at
        // opt-level 1: about a seventh of this build's CPU. libm and half keep the test profile's 3.
        cmd.args(["-Zbuild-std", "-Zbuild-std-features=panic-unwind"]);
        for (package, level) in [("\"*\"", 1), ("libm", 3), ("half", 3)] {
            cmd.arg("--config")
                .arg(format!("profile.test.package.{package}.opt-level={level}"));
        }
    }
    Ok(cmd)
}
