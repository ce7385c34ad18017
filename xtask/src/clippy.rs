//! CI's lint pass, `cargo clippy --workspace --all-targets -- -D warnings`, on a thread of its own beside
//! the firmware steps, whose fat-LTO builds and QEMU runs keep one core busy: one job (`-j 1`, the other
//! core), its own target directory (check builds share nothing with the test build, and the steps'
//! host-tool builds never wait on its lock), its dependencies' proc macros and build scripts compiled
//! without optimisation.

use std::process::Command;

use anyhow::Result;

use crate::background::{self, logged};
use crate::paths::{root, workspace_target_dir};
use crate::toolchain::run_status;

/// The background job's name.
const BACKGROUND: &str = "clippy (every crate and target, warnings denied)";

/// Starts clippy ([`crate::background`], its output in `target/clippy/xtask-clippy.log`); [`wait`]
/// waits for it.
pub fn start() -> Result<()> {
    let dir = workspace_target_dir().join("clippy");
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root())
        .args(["clippy", "--workspace", "--all-targets", "-j", "1"])
        // Dependencies are only checked; what is compiled of them (proc macros, build scripts) need
        // not be optimised.
        .args(["--config", "profile.dev.package.\"*\".opt-level=0"])
        .arg("--target-dir")
        .arg(&dir)
        .args(["--", "-D", "warnings"]);
    background::start(BACKGROUND, dir.join("xtask-clippy.log"), move |file| {
        run_status(logged(&mut cmd, Some(file))?)
    })
}

/// The result of [`start`]'s clippy: its diagnostics when it failed.
pub fn wait() -> Result<()> {
    background::wait(BACKGROUND)
}
