//! The toolchain for the firmware's builds (Cortex-M and RISC-V), chosen by itself.
//!
//! - [`Toolchain::Rustup`]: the active rustup toolchain has the target (`rustup target add ...`): plain
//!   `cargo build --release`, the documented path for users.
//! - [`Toolchain::Debian`]: otherwise, Debian's Rust (`rustc-web`, `cargo-web`) with its library sources
//!   (`rust-web-src`) and `ld.lld`: `RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 /usr/bin/cargo build
//!   --release -Zbuild-std=core`, linking with `ld.lld`. These settings are passed on the command line
//!   and in the environment only, so the firmware's checked-in `.cargo/config.toml` stays the rustup one.
//!
//! Missing Debian packages are installed with apt-get (without recommends) when running as root, with
//! `apt-get update` once per run; otherwise the exact command is printed and the build fails.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, Context, Result};

use crate::paths::on_path;

/// How to build for a Cortex-M target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Toolchain {
    /// The rustup toolchain has the target installed.
    Rustup,
    /// Debian's Rust with `-Zbuild-std=core`.
    Debian,
}

/// Debian's compiler and cargo, from `rustc-web` and `cargo-web`.
const DEBIAN_RUSTC: &str = "/usr/bin/rustc";
const DEBIAN_CARGO: &str = "/usr/bin/cargo";
/// Library sources from `rust-web-src`, which `-Zbuild-std` compiles.
const DEBIAN_RUST_SRC: &str = "/usr/lib/rustlib/src/rust/library/core";

/// A Debian package and how to tell that it is installed.
#[derive(Clone, Copy, Debug)]
pub struct Package {
    /// Package name.
    pub name: &'static str,
    /// Whether what the build needs from it is there.
    pub present: fn() -> bool,
}

/// `qemu-system-arm`, for the Arm boards (mps2, mps3, microbit).
pub const QEMU_ARM: Package = Package {
    name: "qemu-system-arm",
    present: || on_path("qemu-system-arm"),
};

/// `qemu-system-riscv32` (Debian's `qemu-system-misc`), for the RISC-V `virt` board.
pub const QEMU_RISCV: Package = Package {
    name: "qemu-system-misc",
    present: || on_path("qemu-system-riscv32"),
};

const DEBIAN_RUST: [Package; 4] = [
    Package {
        name: "rustc-web",
        present: || Path::new(DEBIAN_RUSTC).is_file(),
    },
    Package {
        name: "cargo-web",
        present: || Path::new(DEBIAN_CARGO).is_file(),
    },
    Package {
        name: "rust-web-src",
        present: || Path::new(DEBIAN_RUST_SRC).is_dir(),
    },
    Package {
        name: "lld",
        present: || on_path("ld.lld"),
    },
];

impl Toolchain {
    /// The toolchain for `target`, for cargo run in `dir` (whose rustup toolchain is asked).
    pub fn detect(target: &str, dir: &Path) -> Toolchain {
        let installed = Command::new("rustup")
            .args(["target", "list", "--installed"])
            .current_dir(dir)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .any(|l| l.trim() == target)
            });
        if installed == Some(true) {
            Toolchain::Rustup
        } else {
            Toolchain::Debian
        }
    }

    /// The Debian packages this toolchain needs.
    pub fn packages(self) -> &'static [Package] {
        match self {
            Toolchain::Rustup => &[],
            Toolchain::Debian => &DEBIAN_RUST,
        }
    }

    /// `cargo build --release` for `target` in `dir`, with this toolchain's settings.
    pub fn cargo_build(self, target: &str, dir: &Path) -> Command {
        self.cargo("build", target, dir)
    }

    /// `cargo <subcommand> --release` (`build` or `run`) for `target` in `dir`, with this toolchain's
    /// settings.
    pub fn cargo(self, subcommand: &str, target: &str, dir: &Path) -> Command {
        let mut cmd = match self {
            Toolchain::Rustup => {
                Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            }
            Toolchain::Debian => Command::new(DEBIAN_CARGO),
        };
        cmd.current_dir(dir)
            .args([subcommand, "--release", "--target", target]);
        if self == Toolchain::Debian {
            cmd.arg("-Zbuild-std=core")
                .env("RUSTC", DEBIAN_RUSTC)
                .env("RUSTC_BOOTSTRAP", "1")
                .env(
                    format!(
                        "CARGO_TARGET_{}_LINKER",
                        target.to_uppercase().replace(['-', '.'], "_")
                    ),
                    "ld.lld",
                );
        }
        cmd
    }

    /// A short description for progress messages.
    pub fn describe(self) -> &'static str {
        match self {
            Toolchain::Rustup => "rustup target",
            Toolchain::Debian => "Debian rustc with -Zbuild-std=core",
        }
    }
}

/// Whether this run has done `apt-get update` already.
static APT_UPDATED: AtomicBool = AtomicBool::new(false);

/// Installs the missing ones of `packages` with apt-get when root; otherwise fails saying what to install.
pub fn ensure_packages(packages: &[Package]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .filter(|p| !(p.present)())
        .map(|p| p.name)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let install = format!(
        "apt-get install -y --no-install-recommends {}",
        missing.join(" ")
    );
    if !is_root() {
        bail!("missing Debian packages; as root, run:\n    apt-get update && {install}");
    }
    if !APT_UPDATED.swap(true, Ordering::Relaxed) {
        eprintln!("xtask: apt-get update");
        run_status(Command::new("apt-get").arg("update"))?;
    }
    eprintln!("xtask: {install}");
    run_status(
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    let still: Vec<&str> = packages
        .iter()
        .filter(|p| !(p.present)())
        .map(|p| p.name)
        .collect();
    if !still.is_empty() {
        bail!("still missing after apt-get install: {}", still.join(" "));
    }
    Ok(())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `cmd` with inherited output; fails unless it exits with success.
pub fn run_status(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}
