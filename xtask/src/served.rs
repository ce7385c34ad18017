//! The serve firmware on QEMU against the host, for `cargo xtask test`: `microlens device run --hash`
//! equals `microlens run --hash`, `device cache` equals `run --cache` byte for byte, and 10,000 random
//! and corrupted frames are each refused (or skipped to the next delimiter) before a valid request
//! still succeeds; on mps2-an386 (int8), the Python package's `microlens.Device` equals its `Model`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use microlens_protocol::{decode, FrameReader, Request, Response, MAX_FRAME};

use crate::blob_source::BlobSource;
use crate::boards::Board;
use crate::paths::{root, workspace_target_dir};
use crate::serve::{self, Server};
use crate::{firmware, host_tool, python, serve_frames};

/// Corrupted frames sent to each board.
const CORRUPTED_FRAMES: usize = 10_000;

/// The tokens checked: a prefix, then a segment repeated (an induction prompt), all below 64; on a
/// device whose context is shorter, as many as it holds.
const TOKENS: [u32; 24] = [
    5, 17, 3, 42, 8, 23, 61, 11, 30, 2, 47, 19, 36, 5, 17, 3, 42, 8, 23, 61, 11, 30, 2, 47,
];

/// How long the device may go without answering while corrupted frames are outstanding: a hang, not a
/// speed limit (QEMU's pace follows the machine's load; the whole run takes as long as it takes).
const CORRUPTED_TIMEOUT: Duration = Duration::from_secs(120);

/// The serve firmware on `board`, with the shipped model as int8 and f32: hashes, caches, fidelity, and
/// (int8, on the Cortex-M4F) the corrupted frames.
pub fn check(board: Board) -> Result<()> {
    let tool = host_tool::build()?;
    let convert = |dtype: &str| {
        BlobSource::Convert {
            checkpoint: root().join(firmware::DEFAULT_CHECKPOINT),
            config: None,
            dtype: dtype.into(),
            options: Vec::new(),
        }
        .resolve(Some(&tool))
    };
    let reference = convert("f32")?;
    for dtype in ["i8", "f32"] {
        let blob = convert(dtype)?;
        let elf = serve::build(board, &blob)?;
        let started = Instant::now();
        let mut server = serve::start(board, &elf, 0)?;
        let checked = device_context(&tool, &server)
            .and_then(|n| {
                let tokens: Vec<String> = TOKENS.iter().take(n).map(u32::to_string).collect();
                let tokens = tokens.join(",");
                against_host(&tool, &blob, &server, board, dtype, &tokens)?;
                fidelity(&tool, &reference, &blob, &server, tokens.split(',').count())?;
                if dtype == "i8" && board == Board::Mps2An386 {
                    python_device(&tool, &blob, &server)?;
                }
                Ok(())
            })
            .and_then(|()| {
                if dtype == "i8" && board == Board::Mps2An386 {
                    corrupted_frames(&mut server)?;
                }
                Ok(())
            });
        let lines: Vec<String> = server.lines.try_iter().collect();
        for line in &lines {
            println!("{line}");
        }
        let checked = checked.and_then(|()| check_stack(&lines, board));
        checked.with_context(|| format!("serve mode on {} ({dtype})", board.name()))?;
        println!(
            "serve {} {dtype}: checks passed in {:.1} s on QEMU",
            board.name(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// The stack high-water mark the firmware printed (at each `Hash`) against `board`'s
/// [`serve::stack_reserve`], with the exception margin of `cargo xtask firmware`.
fn check_stack(lines: &[String], board: Board) -> Result<()> {
    let reserve = serve::stack_reserve(board);
    let used = lines
        .iter()
        .flat_map(|l| l.split_whitespace())
        .filter_map(|w| w.strip_prefix("stack_bytes=")?.parse::<u32>().ok())
        .max()
        .context("the serve firmware printed no stack_bytes=")?;
    println!("serve_stack_bytes={used}");
    ensure!(
        used + 112 <= reserve,
        "serve stack high-water mark {used} B leaves less than 112 B of the {reserve} B reserve"
    );
    Ok(())
}

/// `tool ARGS`'s stdout; fails with its stderr.
fn output(tool: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {}", tool.display()))?;
    if !out.status.success() {
        bail!(
            "microlens {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The positions the device's session holds (`device info`'s `context: N positions`).
fn device_context(tool: &Path, server: &Server) -> Result<usize> {
    let info = output(tool, &["device", "info", "--port", &server.address()])?;
    info.lines()
        .find_map(|l| {
            l.strip_prefix("context: ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .with_context(|| format!("device info gave no context:\n{info}"))
}

/// The device's hash and cache against the host tool's on the same blob and `tokens`.
fn against_host(
    tool: &Path,
    blob: &Path,
    server: &Server,
    board: Board,
    dtype: &str,
    tokens: &str,
) -> Result<()> {
    let port = server.address();
    let blob_arg = blob.to_str().context("blob path is not UTF-8")?;
    let device = output(
        tool,
        &[
            "device", "run", "--port", &port, "--tokens", tokens, "--hash",
        ],
    )?;
    let host = output(tool, &["run", blob_arg, "--tokens", tokens, "--hash"])?;
    println!("device: {device}\nhost:   {host}");
    ensure!(
        device == host,
        "device run --hash {device} differs from run --hash {host}"
    );

    let dir = workspace_target_dir().join("serve");
    std::fs::create_dir_all(&dir)?;
    let stem = format!("{}-{dtype}", board.name());
    let (dev_cache, host_cache) = (
        dir.join(format!("{stem}-device.safetensors")),
        dir.join(format!("{stem}-host.safetensors")),
    );
    let path = |p: &Path| p.to_str().map(str::to_owned).context("path is not UTF-8");
    let started = Instant::now();
    output(
        tool,
        &[
            "device",
            "cache",
            "--port",
            &port,
            "--tokens",
            tokens,
            "-o",
            &path(&dev_cache)?,
        ],
    )?;
    let read_time = started.elapsed().as_secs_f64();
    output(
        tool,
        &[
            "run",
            blob_arg,
            "--tokens",
            tokens,
            "--cache",
            &path(&host_cache)?,
        ],
    )?;
    let (d, h) = (std::fs::read(&dev_cache)?, std::fs::read(&host_cache)?);
    ensure!(
        d == h,
        "device cache ({} B) differs from run --cache ({} B)",
        d.len(),
        h.len()
    );
    println!(
        "device cache = run --cache: {} B, byte for byte (read in {read_time:.1} s)",
        d.len()
    );
    Ok(())
}

/// The Python package's `microlens.Device` against `microlens.Model` of `blob` on this device
/// (`bindings/python/tests/test_device.py`).
fn python_device(tool: &Path, blob: &Path, server: &Server) -> Result<()> {
    let started = Instant::now();
    python::device_tests(&server.address(), blob, tool)?;
    println!(
        "microlens.Device = microlens.Model (pytest tests/test_device.py, {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Sequences of both fidelity runs: a few (each costs a forward pass and, per head, a replay on the
/// device).
const FIDELITY_SEQUENCES: &str = "3";

/// `device fidelity REFERENCE` against `fidelity REFERENCE BLOB` on sequences of `seq_len` tokens: the
/// same report (JSON, without the two descriptions, which name the candidate's path or port).
fn fidelity(
    tool: &Path,
    reference: &Path,
    blob: &Path,
    server: &Server,
    seq_len: usize,
) -> Result<()> {
    let (r, b) = (
        reference.to_str().context("path is not UTF-8")?,
        blob.to_str().context("path is not UTF-8")?,
    );
    let (port, seq_len) = (server.address(), seq_len.to_string());
    let shared = [
        "--sequences",
        FIDELITY_SEQUENCES,
        "--seq-len",
        &seq_len,
        "--json",
    ];
    let mut device_args = vec!["device", "fidelity", r, "--port", &port];
    device_args.extend(shared);
    let mut host_args = vec!["fidelity", r, b];
    host_args.extend(shared);
    let report = |args: &[&str]| -> Result<serde_json::Value> {
        let mut v: serde_json::Value = serde_json::from_str(&output(tool, args)?)?;
        if let Some(o) = v.as_object_mut() {
            o.remove("reference");
            o.remove("candidate");
        }
        Ok(v)
    };
    let (device, host) = (report(&device_args)?, report(&host_args)?);
    ensure!(
        device == host,
        "device fidelity differs from fidelity on the host:\ndevice {device}\nhost   {host}"
    );
    let mean_kl = &device["mean_kl"];
    println!("device fidelity = fidelity on the host (mean KL {mean_kl})");
    Ok(())
}

/// Sends [`CORRUPTED_FRAMES`] bad frames; every frame the device's reader sees must be answered with an
/// `Error`, and then a valid `Info` with its `Info`.
fn corrupted_frames(server: &mut Server) -> Result<()> {
    let frames = serve_frames::corrupted(CORRUPTED_FRAMES, 64, 0x5eed);
    let bytes: Vec<u8> = frames.concat();
    // A leading delimiter ends whatever the reader held; frames as the device's reader sees them.
    let expected = serve_frames::frames_in(&bytes);
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).context("connecting")?;
    stream.set_read_timeout(Some(Duration::from_millis(500)))?;
    let mut writer = stream.try_clone()?;
    let (done_tx, done_rx) = mpsc::channel();
    let sender = thread::spawn(move || {
        let sent = writer
            .write_all(&[0])
            .and_then(|()| writer.write_all(&bytes));
        let _ = done_tx.send(());
        sent.map(|()| writer)
    });
    let (started, mut answered) = (Instant::now(), Instant::now());
    let mut reader = FrameReader::<MAX_FRAME>::new();
    let (mut errors, mut others) = (0usize, Vec::new());
    let mut buf = [0u8; 4096];
    while errors + others.len() < expected {
        if answered.elapsed() > CORRUPTED_TIMEOUT {
            bail!(
                "no answer for {} s after {} of {expected} corrupted frames",
                CORRUPTED_TIMEOUT.as_secs(),
                errors + others.len()
            );
        }
        let n = match stream.read(&mut buf) {
            Ok(0) => bail!("the device closed the connection"),
            Ok(n) => {
                answered = Instant::now();
                n
            }
            Err(_) if server.running() => continue,
            Err(e) => bail!("QEMU exited: {e}"),
        };
        for &b in &buf[..n] {
            match reader.push(b) {
                Some(Ok(body)) => match decode::<Response>(body) {
                    Ok(Response::Error(_)) => errors += 1,
                    other => others.push(format!("{other:?}")),
                },
                Some(Err(e)) => others.push(format!("bad frame from the device: {e}")),
                None => {}
            }
        }
    }
    let _ = done_rx.recv_timeout(CORRUPTED_TIMEOUT);
    let mut writer = sender
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))?
        .context("sending the corrupted frames")?;
    ensure!(
        others.is_empty(),
        "answers other than Error: {:?}",
        &others[..others.len().min(5)]
    );
    writer.write_all(&serve_frames::frame(&Request::Info))?;
    let info = loop {
        let n = stream
            .read(&mut buf)
            .context("no answer to Info after the corrupted frames")?;
        ensure!(n > 0, "the device closed the connection");
        let found = buf[..n].iter().find_map(|&b| match reader.push(b) {
            Some(Ok(body)) => Some(decode::<Response>(body)),
            _ => None,
        });
        if let Some(r) = found {
            break r;
        }
    };
    ensure!(
        matches!(info, Ok(Response::Info(_))),
        "Info after the corrupted frames answered {info:?}"
    );
    ensure!(server.running(), "QEMU exited");
    println!(
        "{CORRUPTED_FRAMES} corrupted frames ({expected} as the device reads them): {errors} Error answers, then Info answered ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
