//! `cargo xtask runner ELF`: the cargo runner of the firmware example (`cargo run` in
//! `firmware-example/`, through its `runner` script). The board comes from the ELF (the
//! `_microlens_board_<name>` symbol its `build.rs` defines): an emulated board runs on QEMU with the
//! machine and CPU `cargo xtask firmware` uses, its defmt log decoded by `defmt-print`; a real board is
//! flashed and its defmt log streamed by `probe-rs run --chip <chip>`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::boards::Runs;
use crate::paths::on_path;
use crate::qemu;
use crate::toolchain::{ensure_packages, run_status};
use crate::{defmt_print, elf_size};

/// `cargo xtask runner`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The firmware ELF (cargo passes it).
    pub elf: PathBuf,
    /// Seconds before QEMU is stopped (emulated boards).
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
}

/// Runs the ELF on its board; fails if the firmware fails or (on QEMU) does not exit in time.
pub fn run(args: Args) -> Result<()> {
    let board = elf_size::board(&args.elf)?;
    match board.spec().runs {
        runs @ Runs::Qemu {
            system, machine, ..
        } => {
            ensure_packages(&[system])?;
            defmt_print::ensure()?;
            let command = qemu::command(runs, None, &args.elf)?;
            eprintln!("xtask: running {} on QEMU {machine}", args.elf.display());
            let run = qemu::run(command, &args.elf, Duration::from_secs(args.timeout))?;
            let Some(failed) = run.ending.failure(args.timeout) else {
                return Ok(());
            };
            eprintln!("{}", run.stderr.trim_end());
            bail!("{failed}")
        }
        Runs::Probe { chip } => {
            if !on_path("probe-rs") {
                bail!("probe-rs is not on PATH: `cargo install probe-rs-tools`, then plug in the board's probe");
            }
            eprintln!("xtask: probe-rs run --chip {chip} {}", args.elf.display());
            run_status(
                Command::new("probe-rs")
                    .args(["run", "--chip", chip])
                    .arg(&args.elf),
            )
        }
    }
}
