//! `cargo run` in `firmware-example/`, as a user types it: the default blob (the shipped model as int8,
//! checked to be its current conversion) built for a board and run through the runner, its logits hash
//! checked against the host's (the core crate stepping a session in xtask).

use std::process::Stdio;

use anyhow::{bail, Context, Result};

use crate::blob_source::BlobSource;
use crate::boards::{Board, Runs};
use crate::device::Report;
use crate::paths::{firmware_dir, root};
use crate::reference;
use crate::toolchain::{ensure_packages, Toolchain};
use crate::{defmt_print, firmware, host_tool, models};

/// The blob the firmware embeds when `MICROLENS_BLOB` is unset (its `build.rs`'s `DEFAULT_BLOB`).
const DEFAULT_BLOB: &str = "model/induction-2l-i8.mlb";

/// Fails unless the firmware's default blob equals `microlens convert` of the default shipped
/// checkpoint ([`models::SHIPPED`]'s first) as int8 now, so that a change to the converter or the
/// checkpoint cannot leave it stale.
pub fn default_blob_is_current() -> Result<()> {
    let tool = host_tool::build()?;
    let fresh = BlobSource::Convert {
        checkpoint: root().join(models::SHIPPED[0].checkpoint),
        config: None,
        dtype: "i8".into(),
        options: Vec::new(),
    }
    .resolve(Some(&tool))?;
    let shipped = firmware_dir().join(DEFAULT_BLOB);
    let read = |p: &std::path::Path| {
        std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))
    };
    if read(&fresh)? != read(&shipped)? {
        bail!(
            "{} differs from a fresh conversion ({}): copy that over it",
            shipped.display(),
            fresh.display()
        );
    }
    Ok(())
}

/// `cargo run --release --features <board>` in `firmware-example/` (with the board's target and rustflags
/// beyond it, and `-Zbuild-std=core` on Debian's toolchain), without `MICROLENS_BLOB`: the run must succeed and its `logits_hash=` equal the host's
/// for the default blob on the device's prompt (what `microlens run --hash` prints).
pub fn check(board: Board) -> Result<()> {
    let spec = board.spec();
    let Runs::Qemu { system, .. } = spec.runs else {
        bail!("{} is not an emulated board", board.name());
    };
    let dir = firmware_dir();
    let toolchain = Toolchain::detect(spec.target, &dir);
    let mut packages = toolchain.packages().to_vec();
    packages.push(system);
    ensure_packages(&packages)?;
    defmt_print::ensure()?;
    let mut cmd = toolchain.cargo("run", spec.target, &dir);
    cmd.args(firmware::board_rustflags(spec))
        .args(["--features", board.name()])
        .env_remove("MICROLENS_BLOB")
        .env_remove("MICROLENS_SEED")
        .env_remove("MICROLENS_STACK_RESERVE")
        .env_remove("MICROLENS_FACT_PROMPT")
        .stderr(Stdio::inherit());
    eprintln!("xtask: {cmd:?}");
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    let report = Report {
        lines: String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect(),
    };
    if !out.status.success() {
        bail!("cargo run failed ({})", out.status);
    }
    let device = report.logits_hash()?;
    let host = reference::core_hash(&dir.join(DEFAULT_BLOB), &report.prompt()?)?;
    println!("cargo_run_logits_hash={device:016x} host_logits_hash={host:016x}");
    if device != host {
        bail!("logits hashes differ: cargo run {device:016x}, host {host:016x}");
    }
    Ok(())
}
