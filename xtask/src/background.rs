//! Work that `cargo xtask test` runs on a thread of its own beside the firmware steps, whose fat-LTO
//! builds and QEMU runs keep one core busy: each job writes its output to a log file, and a later step
//! waits for it and reports how it went.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};

/// A job started by [`start`].
struct Job {
    name: &'static str,
    log: PathBuf,
    handle: JoinHandle<Result<()>>,
}

/// The jobs started and not yet waited for.
static JOBS: Mutex<Vec<Job>> = Mutex::new(Vec::new());

/// Starts `work` on a thread of its own, its output going to `log` (created, parents included).
pub fn start(
    name: &'static str,
    log: PathBuf,
    work: impl FnOnce(&File) -> Result<()> + Send + 'static,
) -> Result<()> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    eprintln!("xtask: {name}, in the background ({})", log.display());
    let handle = std::thread::spawn(move || work(&file));
    JOBS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Job { name, log, handle });
    Ok(())
}

/// Waits for the job `name`, if it was started: its outcome, with the end of its log when it failed.
/// `Ok` when no such job was started.
pub fn wait(name: &str) -> Result<()> {
    let job = {
        let mut jobs = JOBS.lock().unwrap_or_else(|e| e.into_inner());
        match jobs.iter().position(|j| j.name == name) {
            Some(i) => jobs.remove(i),
            None => return Ok(()),
        }
    };
    let started = Instant::now();
    let outcome = job
        .handle
        .join()
        .unwrap_or_else(|_| Err(anyhow!("its thread panicked")));
    eprintln!(
        "xtask: {} {} (waited {:.0} s; its output: {})",
        job.name,
        if outcome.is_ok() { "done" } else { "failed" },
        started.elapsed().as_secs_f64(),
        job.log.display()
    );
    if let Err(e) = outcome {
        eprintln!("{}", log_tail(&job.log, 60));
        bail!("{}: {e:#}", job.name);
    }
    Ok(())
}

/// The last `n` lines of `log`.
pub fn log_tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Sends `cmd`'s output to `log`, or leaves it inherited.
pub fn logged<'a>(cmd: &'a mut Command, log: Option<&File>) -> Result<&'a mut Command> {
    if let Some(log) = log {
        cmd.stdout(log.try_clone()?).stderr(log.try_clone()?);
    }
    Ok(cmd)
}
