//! Running the firmware on QEMU with instruction counting, its defmt output decoded by `defmt-print`,
//! e.g. for the mps2-an386:
//!
//! `qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic -icount shift=0 -kernel ELF
//! -semihosting-config enable=on,target=native | defmt-print -e ELF`; on the netduinoplus2 the log is
//! the second serial port instead (`-serial null -serial stdio -monitor none -no-reboot`).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::boards::{Log, Runs};
use crate::device::Report;

/// How the firmware's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// QEMU exited (through the firmware's semihosting exit) with this status.
    Exited(ExitStatus),
    /// The firmware said `firmware_exit=` and reset the chip ([`Log::SecondSerial`]).
    Reset {
        /// What it said.
        success: bool,
    },
    /// It was still running at the timeout and was killed.
    TimedOut,
}

impl Ending {
    /// What went wrong, if anything (`timeout`: the seconds QEMU had).
    pub fn failure(self, timeout: u64) -> Option<String> {
        match self {
            Ending::Exited(status) if status.success() => None,
            Ending::Reset { success: true } => None,
            Ending::Exited(status) => Some(format!("the firmware failed ({status})")),
            Ending::Reset { success: false } => Some("the firmware failed".into()),
            Ending::TimedOut => Some(format!("the firmware did not exit within {timeout} s")),
        }
    }
}

/// A finished run.
#[derive(Debug)]
pub struct Run {
    /// The decoded lines.
    pub report: Report,
    /// How it ended.
    pub ending: Ending,
    /// What QEMU and defmt-print wrote to stderr.
    pub stderr: String,
}

/// The QEMU command line for `elf` on an emulated board (`runs`), as [`run`] runs it; `link`, a chardev
/// for the board's serial link (serve mode's `tcp:...`), else the UART is left unconnected.
pub fn command(runs: Runs, link: Option<&str>, elf: &Path) -> Result<Command> {
    let Runs::Qemu {
        system,
        machine,
        cpu,
        args,
        log,
    } = runs
    else {
        bail!("not an emulated board");
    };
    let mut qemu = Command::new(crate::firmware::system_binary(system.name));
    qemu.args(["-machine", machine]);
    if let Some(cpu) = cpu {
        qemu.args(["-cpu", cpu]);
    }
    qemu.args(args)
        .arg("-nographic")
        .args(["-icount", "shift=0", "-kernel"])
        .arg(elf);
    match log {
        Log::Semihosting => {
            qemu.args(["-semihosting-config", "enable=on,target=native"]);
            if let Some(link) = link {
                qemu.args(["-serial", link, "-monitor", "none"]);
            }
        }
        Log::SecondSerial => {
            qemu.args(["-serial", link.unwrap_or("null")]).args([
                "-serial",
                "stdio",
                "-monitor",
                "none",
                "-no-reboot",
            ]);
        }
    }
    Ok(qemu)
}

/// Runs `qemu` (from [`command`]) on `elf`, echoing each decoded line to stdout as it arrives; kills it
/// after `timeout`.
pub fn run(mut qemu: Command, elf: &Path, timeout: Duration) -> Result<Run> {
    let program = qemu.get_program().to_owned();
    let mut qemu = qemu
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {program:?}"))?;
    let frames = qemu.stdout.take().context("no QEMU stdout")?;
    let mut decoder = Command::new("defmt-print")
        .arg("-e")
        .arg(elf)
        .stdin(frames)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start defmt-print")?;

    let decoded = decoder.stdout.take().context("no defmt-print stdout")?;
    let lines = thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(decoded).lines().map_while(Result::ok) {
            println!("{line}");
            lines.push(line);
        }
        lines
    });
    let qemu_err = read_all(qemu.stderr.take());
    let decoder_err = read_all(decoder.stderr.take());

    let start = Instant::now();
    let ending = loop {
        if let Some(status) = qemu.try_wait()? {
            break Ending::Exited(status);
        }
        if start.elapsed() > timeout {
            qemu.kill().context("cannot kill QEMU")?;
            qemu.wait()?;
            break Ending::TimedOut;
        }
        thread::sleep(Duration::from_millis(20));
    };
    decoder.wait()?;
    let lines = lines.join().unwrap_or_default();
    // A board that ends by a reset says how first; QEMU exits with 0 either way.
    let said = lines.iter().rev().find_map(|l| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix("firmware_exit="))
            .map(|v| v == "true")
    });
    let ending = match (ending, said) {
        (Ending::Exited(_), Some(success)) => Ending::Reset { success },
        (ending, _) => ending,
    };
    let stderr = [
        qemu_err.join().unwrap_or_default(),
        decoder_err.join().unwrap_or_default(),
    ]
    .concat();
    Ok(Run {
        report: Report { lines },
        ending,
        stderr,
    })
}

/// Reads a pipe to its end on a thread.
fn read_all(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_string(&mut text);
        }
        text
    })
}
