//! `cargo xtask browser`: `microlens report`'s page and the `--html` heatmaps in a real browser.
//!
//! Installs headless Chromium and its WebDriver (Debian's `chromium`, `chromium-driver`), writes the
//! pages for the shipped model (f32 reference, int8 candidate, 8 random sequences; a report of the
//! byte-level model on a hostile prompt; `patch --html`), checks the report's size, starts chromedriver
//! on 127.0.0.1 and runs the `browser-check` crate against it, which saves a screenshot of the report.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use crate::blob_source::BlobSource;
use crate::paths::{on_path, root, workspace_target_dir};
use crate::toolchain::{ensure_packages, run_status, Package};
use crate::{firmware, host_tool, models};

/// Debian's headless-capable Chromium.
const CHROMIUM: Package = Package {
    name: "chromium",
    present: || on_path("chromium"),
};

/// Its WebDriver, `chromedriver`.
const CHROMEDRIVER: Package = Package {
    name: "chromium-driver",
    present: || on_path("chromedriver"),
};

/// A prompt that would run script, load an image and break out of an attribute if its text reached the
/// page unescaped (56 bytes: the byte-level model's context is 64).
pub const HOSTILE: &str = r#""'><script>pwned=1</script><img src=x onerror="pwned=2">"#;

/// The report of the shipped model with 64 tokens must stay under this (issue 31).
const MAX_REPORT_BYTES: u64 = 2 << 20;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to save the browser's screenshot of the report [default: <target>/report/report.png].
    #[arg(long)]
    pub screenshot: Option<PathBuf>,
}

/// chromedriver, ended when dropped.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts chromedriver on a free port of 127.0.0.1 and waits until it listens.
fn start_driver() -> Result<(Driver, u16)> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .stdout(Stdio::null())
        .spawn()
        .context("cannot start chromedriver")?;
    let driver = Driver(child);
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(30) {
            bail!("chromedriver did not listen on port {port} within 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok((driver, port))
}

/// `microlens convert CHECKPOINT --dtype DTYPE`.
fn blob(tool: &Path, checkpoint: &str, dtype: &str) -> Result<PathBuf> {
    BlobSource::Convert {
        checkpoint: root().join(checkpoint),
        config: None,
        dtype: dtype.into(),
        options: Vec::new(),
    }
    .resolve(Some(tool))
}

/// `path` relative to the repository's root (the report shows its files' names as given).
fn relative(path: &Path) -> PathBuf {
    path.strip_prefix(root()).unwrap_or(path).to_path_buf()
}

/// Installs Chromium and chromedriver if missing (Debian packages).
pub fn prepare() -> Result<()> {
    ensure_packages(&[CHROMIUM, CHROMEDRIVER])
}

/// Runs the step.
pub fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    prepare()?;
    eprintln!(
        "xtask: chromium and chromedriver ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let tool = host_tool::build()?;
    let dir = workspace_target_dir().join("report");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (f32_blob, i8_blob) = (
        relative(&blob(&tool, firmware::DEFAULT_CHECKPOINT, "f32")?),
        relative(&blob(&tool, firmware::DEFAULT_CHECKPOINT, "i8")?),
    );
    let bytes_blob = relative(&blob(&tool, models::by_name("bytes")?.checkpoint, "f32")?);

    let report = dir.join("report.html");
    run_status(
        Command::new(&tool)
            .current_dir(root())
            .arg("report")
            .args([&f32_blob, &i8_blob])
            .args(["--sequences", "8", "-o"])
            .arg(&report),
    )?;
    let size = std::fs::metadata(&report)?.len();
    ensure!(
        size < MAX_REPORT_BYTES,
        "the report is {size} bytes, over {MAX_REPORT_BYTES}"
    );
    println!("report of the shipped model, f32 vs i8, 64 tokens: {size} bytes");
    let hostile = dir.join("hostile.html");
    let ids: Vec<String> = HOSTILE.bytes().map(|b| b.to_string()).collect();
    run_status(
        Command::new(&tool)
            .current_dir(root())
            .arg("report")
            .arg(&bytes_blob)
            .args(["--tokens", &ids.join(","), "-o"])
            .arg(&hostile),
    )?;
    let patch = dir.join("patch.html");
    run_status(
        Command::new(&tool)
            .current_dir(root())
            .arg("patch")
            .arg(&f32_blob)
            .args([
                "--clean",
                "5,9,13,17,21,5,9,13,17",
                "--corrupt",
                "5,9,13,17,21,5,9,13,40",
            ])
            .args(["--answer", "21", "--wrong", "41", "--html"])
            .arg(&patch)
            .stdout(Stdio::null()),
    )?;

    let build = Instant::now();
    let checker = host_tool::build_package("webdriver", "browser-check", "browser-check")?;
    eprintln!(
        "xtask: browser-check built in {:.1} s",
        build.elapsed().as_secs_f64()
    );
    let screenshot = args.screenshot.unwrap_or_else(|| dir.join("report.png"));
    let (_driver, port) = start_driver()?;
    run_status(
        Command::new(checker)
            .arg(format!("--webdriver=http://127.0.0.1:{port}"))
            .arg("--report")
            .arg(&report)
            .args(["--heads", "2,4", "--hostile"])
            .arg(&hostile)
            .arg(format!("--hostile-text={HOSTILE}"))
            .arg("--heatmaps")
            .arg(&patch)
            .arg("--screenshot")
            .arg(&screenshot),
    )
}
