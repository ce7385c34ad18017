//! `cargo xtask thumbv6m`: the core crate must build for Cortex-M0+ (ARMv6-M: no FPU, no DSP, no
//! unaligned loads, no atomic read-modify-write).

use anyhow::Result;

use crate::paths::{root, workspace_target_dir};
use crate::toolchain::{ensure_packages, run_status, Toolchain};

/// The Cortex-M0+ target.
pub const TARGET: &str = "thumbv6m-none-eabi";

/// Installs the toolchain the build needs (Debian packages), if missing.
pub fn prepare() -> Result<()> {
    ensure_packages(Toolchain::detect(TARGET, root()).packages())
}

/// Builds the `microlens` library for [`TARGET`] in a target directory of its own (`target/thumbv6m`:
/// it never waits on the lock of the host builds' directory).
pub fn check() -> Result<()> {
    let toolchain = Toolchain::detect(TARGET, root());
    prepare()?;
    eprintln!(
        "xtask: building microlens for {TARGET} ({})",
        toolchain.describe()
    );
    run_status(
        toolchain
            .cargo_build(TARGET, root())
            .args(["-p", "microlens", "--target-dir"])
            .arg(workspace_target_dir().join("thumbv6m")),
    )?;
    println!("core_{TARGET}=ok");
    Ok(())
}
