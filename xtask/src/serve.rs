//! `cargo xtask serve --board B [--blob X.mlb] [--port N]`: the firmware in serve mode on QEMU, its UART
//! on `127.0.0.1:N`, for `microlens device ... --port tcp:127.0.0.1:N`; runs until stopped.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::blob_source::BlobSource;
use crate::boards::{Board, Runs};
use crate::paths::{firmware_dir, root};
use crate::toolchain::{ensure_packages, Toolchain};
use crate::{defmt_print, firmware, host_tool, qemu};

/// Arguments of `cargo xtask serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// An emulated board with a UART driver: microbit, mps2-an385, mps2-an386, mps2-an500 or
    /// netduinoplus2.
    #[arg(long, value_enum, default_value_t = Board::Mps2An386)]
    pub board: Board,
    /// The blob to serve [default: the shipped induction model as int8].
    #[arg(long)]
    pub blob: Option<PathBuf>,
    /// TCP port of the board's UART on 127.0.0.1 [default: a free one].
    #[arg(long)]
    pub port: Option<u16>,
}

/// Stack reserve of `board`'s serve build: the deepest answer (a `Read`, its capture hook sending a frame
/// from inside the forward pass) needs more than the demo: with the shipped model 4,928 B on the
/// Cortex-M4F, 5,084 B on the Cortex-M0 (ARMv6-M keeps more on the stack), plus the exception margin.
pub fn stack_reserve(board: Board) -> u32 {
    match board {
        Board::Microbit => 5376,
        _ => 5120,
    }
}

/// The boards whose firmware has a UART driver for serve mode (the nRF51's UART, the CMSDK APB UART,
/// the STM32F4's USART).
pub const SERVE_BOARDS: [Board; 5] = [
    Board::Microbit,
    Board::Mps2An385,
    Board::Mps2An386,
    Board::Mps2An500,
    Board::Netduinoplus2,
];

/// Seconds the firmware has to open its session and say it serves.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A serve firmware running on QEMU; dropping it stops QEMU.
pub struct Server {
    qemu: Child,
    decoder: Child,
    /// The UART's TCP port on 127.0.0.1.
    pub port: u16,
    /// The firmware's decoded defmt lines after `serving=1`.
    pub lines: mpsc::Receiver<String>,
}

impl Server {
    /// `tcp:127.0.0.1:<port>`, for `microlens device --port`.
    pub fn address(&self) -> String {
        format!("tcp:127.0.0.1:{}", self.port)
    }

    /// Whether QEMU is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.qemu.try_wait(), Ok(None))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.qemu.kill();
        let _ = self.qemu.wait();
        let _ = self.decoder.wait();
    }
}

/// The shipped induction model as int8 (converted with the host tool).
pub fn default_blob() -> Result<PathBuf> {
    let tool = host_tool::build()?;
    BlobSource::Convert {
        checkpoint: root().join(firmware::DEFAULT_CHECKPOINT),
        config: None,
        dtype: "i8".into(),
        options: Vec::new(),
    }
    .resolve(Some(&tool))
}

/// Builds the serve firmware for `board` with `blob`: its ELF.
pub fn build(board: Board, blob: &Path) -> Result<PathBuf> {
    if !SERVE_BOARDS.contains(&board) {
        bail!(
            "serve mode runs on {}; {} has no UART driver yet",
            SERVE_BOARDS.map(Board::name).join(", "),
            board.name()
        );
    }
    let spec = board.spec();
    let Runs::Qemu { system, .. } = spec.runs else {
        bail!(
            "{} is not emulated: flash its serve build with probe-rs",
            board.name()
        );
    };
    let toolchain = Toolchain::detect(spec.target, &firmware_dir());
    let mut packages = toolchain.packages().to_vec();
    packages.push(system);
    ensure_packages(&packages)?;
    let elf = firmware::build(
        toolchain,
        board,
        spec,
        blob,
        None,
        Some(stack_reserve(board)),
        None,
        None,
        true,
    )?;
    firmware::print_sizes(&crate::elf_size::read(&elf)?);
    Ok(elf)
}

/// Starts `elf` (a serve build for `board`) on QEMU with its UART on `port` (0: a free one) and waits
/// until it serves.
pub fn start(board: Board, elf: &Path, port: u16) -> Result<Server> {
    let runs = board.spec().runs;
    if !matches!(runs, Runs::Qemu { .. }) {
        bail!("{} is not emulated", board.name());
    }
    defmt_print::ensure()?;
    let port = match port {
        0 => free_port()?,
        p => p,
    };
    let link = format!("tcp:127.0.0.1:{port},server=on,wait=off");
    let mut command = qemu::command(runs, Some(&link), elf)?;
    let mut qemu = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start QEMU")?;
    let frames = qemu.stdout.take().context("no QEMU stdout")?;
    let mut decoder = Command::new("defmt-print")
        .arg("-e")
        .arg(elf)
        .stdin(frames)
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start defmt-print")?;
    let decoded = decoder.stdout.take().context("no defmt-print stdout")?;
    let (tx, lines) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(decoded).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let server = Server {
        qemu,
        decoder,
        port,
        lines,
    };
    loop {
        match server.lines.recv_timeout(READY_TIMEOUT) {
            Ok(line) if line.contains("serving=1") => return Ok(server),
            Ok(line) => eprintln!("{line}"),
            Err(_) => bail!(
                "the serve firmware did not say serving=1 within {} s",
                READY_TIMEOUT.as_secs()
            ),
        }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free TCP port")?;
    Ok(listener.local_addr()?.port())
}

/// Runs `cargo xtask serve`.
pub fn run(args: Args) -> Result<()> {
    let blob = match &args.blob {
        Some(blob) => blob.clone(),
        None => default_blob()?,
    };
    let elf = build(args.board, &blob)?;
    let mut server = start(args.board, &elf, args.port.unwrap_or(0))?;
    println!("serving on {}", server.address());
    loop {
        match server.lines.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => println!("{line}"),
            Err(mpsc::RecvTimeoutError::Timeout) if server.running() => {}
            _ => break,
        }
    }
    if server.running() {
        return Ok(());
    }
    bail!("QEMU exited")
}
