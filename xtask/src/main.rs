//! `cargo xtask`: project automation.
//!
//! - `cargo xtask test`: every test, as CI runs it (`.ci/run`).
//! - `cargo xtask demo`: the shipped model converted, analysed, compared and run on QEMU.
//! - `cargo xtask firmware [--board B]`: builds the host tool, converts the model to a blob, builds the
//!   firmware example with it for a board, runs it on QEMU (emulated boards), prints the device's lines
//!   and the firmware's flash and RAM sizes, and checks the device against the host (same logits hash,
//!   accuracy, clean exit) and the board's budgets.
//! - `cargo xtask boards`: `cargo xtask firmware` on every board (int8 and f32 on the emulated ones),
//!   and a markdown table of what they measured.
//! - `cargo xtask serve [--board B] [--blob X] [--port N]`: the firmware in serve mode on QEMU, its UART
//!   on `tcp:127.0.0.1:N` for `microlens device`.
//! - `cargo xtask runner ELF`: cargo's runner for `cargo run` in `firmware-example/` (through its
//!   `runner` script): QEMU and defmt-print for an emulated board, `probe-rs run` for a real one.
//! - `cargo xtask cargo-run [--board B]`: that `cargo run`, checked against the host.
//! - `cargo xtask profile`: a token's instructions on QEMU per function (of the firmware built last).
//! - `cargo xtask browser [--screenshot PNG]`: `microlens report`'s page and the `--html` heatmaps in
//!   headless Chromium through WebDriver (installed from Debian's packages).
//! - `cargo xtask thumbv6m`: checks that the core crate builds for Cortex-M0+ (no FPU, no DSP).
//! - `cargo xtask core32`: the core's tests on i686, where `usize` is 32 bits.
//! - `cargo xtask fuzz [--seconds N | --runs N] [--target T]`: coverage-guided fuzzing (cargo-fuzz, libFuzzer).
//! - `cargo xtask bench-peers [--runs N] [--python P]`: host speed beside candle and TransformerLens.
//! - `cargo xtask bench-device-peers [--cmsis-nn DIR] [--llama2c DIR]`: device speed on QEMU beside
//!   CMSIS-NN and llama2.c, built from their sources with gcc.
//!
//! The firmware's toolchain is chosen by itself: the rustup target when installed, otherwise Debian's Rust
//! with `-Zbuild-std=core` (installed with apt-get when running as root); see [`toolchain`].

mod background;
mod bench_peers;
mod beside_firmware;
mod blob_source;
mod boards;
mod browser;
mod cargo_run;
mod compile_time_crates;
mod core32;
mod defmt_print;
mod demo;
mod device;
mod device_peers;
mod elf_size;
mod firmware;
mod fuzz;
mod host_tool;
mod lint;
mod matrix;
mod models;
mod paths;
mod profile;
mod python;
mod qemu;
mod reference;
mod reproduce;
mod runner;
mod serve;
mod serve_frames;
mod served;
mod test;
mod thumbv6m;
mod toolchain;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "microlens project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every test, as CI runs it: fmt, clippy, workspace tests, no_std core, thumbv6m, firmware on QEMU.
    Test(test::Args),
    /// The whole story: the shipped model to f32 and int8 blobs, its circuits, int8-vs-float fidelity,
    /// and the firmware running it on QEMU.
    Demo,
    /// Build the firmware example with a model blob, run it on QEMU and check it against the host.
    Firmware(Box<firmware::Args>),
    /// Every board: the emulated ones run with the shipped model as int8 and f32 and checked, the real
    /// ones built; prints a markdown table of flash, RAM and instructions per token and per MAC.
    Boards {
        /// `stories`: the LLaMA-family story model instead (int8, int4 on the micro:bit), its story
        /// continued and checked on the emulated boards.
        #[arg(long, value_parser = ["induction", "stories"], default_value = "induction")]
        model: String,
    },
    /// `microlens report`'s page and the `--html` heatmaps in headless Chromium through WebDriver: every
    /// head panel, hover, no fetch, no console error, a hostile prompt shown as text; a screenshot.
    Browser(browser::Args),
    /// The firmware in serve mode on QEMU, its UART on 127.0.0.1:PORT for `microlens device`; runs until
    /// stopped.
    Serve(serve::Args),
    /// The serve firmware on QEMU against the host (as `cargo xtask test` runs it): `device run --hash`
    /// and `device cache` equal the host's (int8 and f32), 10,000 corrupted frames refused; on
    /// mps2-an386, the Python package's `microlens.Device` against its `Model` (int8).
    ServeCheck {
        /// A board with serve mode: mps2-an385, mps2-an386 or mps2-an500.
        #[arg(long, value_enum, default_value_t = boards::Board::Mps2An386)]
        board: boards::Board,
    },
    /// The Python package's step of `cargo xtask test` alone: build and stage it, pytest in a venv.
    Python,
    /// Run a firmware ELF built by `cargo build` in firmware-example/ (cargo's runner there): on QEMU with
    /// its defmt log decoded (emulated boards), or flashed with `probe-rs run --chip CHIP` (real boards).
    Runner(runner::Args),
    /// `cargo run --release --features BOARD` in firmware-example/ (the default blob, the runner on QEMU),
    /// its logits hash checked against the host's (as `cargo xtask test` runs it on mps2-an386).
    CargoRun {
        /// An emulated board.
        #[arg(long, value_enum, default_value_t = boards::Board::Mps2An386)]
        board: boards::Board,
    },
    /// Check that the core crate builds for thumbv6m-none-eabi (Cortex-M0+).
    Thumbv6m,
    /// The core crate's tests on a 32-bit target (i686), where `usize` size arithmetic could wrap.
    Core32,
    /// Coverage-guided fuzzing (cargo-fuzz, installed if missing): each target for --seconds or --runs.
    Fuzz(fuzz::Args),
    /// Where a token's instructions go on QEMU, per inlined function and source file (run after
    /// `cargo xtask firmware`, whose ELF it traces).
    Profile(profile::Args),
    /// Host speed beside the peers in one run: microlens, candle and (where the Python has it)
    /// TransformerLens on the shipped model, with the ratios.
    BenchPeers(bench_peers::Args),
    /// Device speed beside the peers in one QEMU `-icount` run: CMSIS-NN's int8 layer and softmax on
    /// the Cortex-M4F, M3 and M0, llama2.c's `run.c` and `runq.c` on the M4F, and microlens's figures.
    BenchDevicePeers(device_peers::Args),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Test(args) => test::run(args),
        Command::Demo => demo::run(),
        Command::Firmware(args) => firmware::run(*args).map(|_| ()),
        Command::Boards { model } => matrix::table(model == "stories"),
        Command::Browser(args) => browser::run(args),
        Command::Serve(args) => serve::run(args),
        Command::ServeCheck { board } => served::check(board),
        Command::Python => python::test(),
        Command::Runner(args) => runner::run(args),
        Command::CargoRun { board } => cargo_run::check(board),
        Command::Thumbv6m => thumbv6m::check(),
        Command::Fuzz(args) => fuzz::run(args),
        Command::Core32 => core32::run(),
        Command::Profile(args) => profile::run(args),
        Command::BenchPeers(args) => bench_peers::run(args),
        Command::BenchDevicePeers(args) => device_peers::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
