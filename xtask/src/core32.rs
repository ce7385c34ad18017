//! `cargo xtask core32`: the core crate's tests where `usize` is 32 bits (`i686-unknown-linux-gnu`, run
//! natively), so size arithmetic that could wrap on a 32-bit microcontroller is exercised on the host.
//!
//! With the rustup target installed, plain `cargo test --target`; otherwise Debian's Rust compiles the
//! standard library for i686 (`-Zbuild-std`), linked against Debian's 32-bit C library (`gcc-multilib`),
//! both installed with apt-get when missing (as for the firmware, [`crate::toolchain`]).

use std::path::Path;
use std::process::Command;

use anyhow::Result;

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
        cmd.arg("-Zbuild-std");
    }
    run_status(&mut cmd)
}
