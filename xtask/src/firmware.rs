//! `cargo xtask firmware`: host tool, blob, firmware build, QEMU run, sizes and the host cross-check.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::blob_source::BlobSource;
use crate::device::Report;
use crate::paths::{firmware_dir, root};
use crate::qemu::Ending;
use crate::reference::Reference;
use crate::toolchain::{ensure_packages, run_status, Toolchain, QEMU};
use crate::{defmt_print, elf_size, host_tool, qemu, reference, thumbv6m};

/// The firmware's target.
const TARGET: &str = "thumbv7em-none-eabihf";
/// The firmware's binary name.
const BIN: &str = "microlens-firmware-example";
/// The trained model the firmware ships with (converted to `--dtype`).
const DEFAULT_CHECKPOINT: &str = "firmware-example/model/induction-2l.safetensors";

/// A board of the firmware example (its cargo feature).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Board {
    /// QEMU's mps2-an386 (Cortex-M4F): built, run and checked.
    Qemu,
    /// nRF52840: built and measured only (run it with `cargo run --release --features nrf52840` in
    /// firmware-example/, through probe-rs).
    Nrf52840,
}

impl Board {
    fn feature(self) -> &'static str {
        match self {
            Board::Qemu => "qemu",
            Board::Nrf52840 => "nrf52840",
        }
    }
}

/// Arguments of `cargo xtask firmware`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Embed this blob as it is, instead of converting a checkpoint.
    #[arg(long, conflicts_with = "checkpoint")]
    blob: Option<PathBuf>,
    /// Checkpoint to convert with `microlens convert` [default: firmware-example/model/induction-2l.safetensors].
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Config JSON of the checkpoint [default: <checkpoint stem>.json beside it if it exists, else
    /// config.json beside it].
    #[arg(long, conflicts_with = "blob")]
    config: Option<PathBuf>,
    /// Storage type of the converted matrices (f32, f16, i8, i4).
    #[arg(long, default_value = "i8", conflicts_with = "blob")]
    dtype: String,
    /// Board to build for.
    #[arg(long, value_enum, default_value_t = Board::Qemu)]
    board: Board,
    /// Fail if the device's next-token accuracy on the repeated segment is below this.
    #[arg(long, default_value_t = 0.9)]
    min_accuracy: f32,
    /// Seconds before a firmware that has not exited is killed (and the run fails).
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Who computes the host's logits hash.
    #[arg(long, value_enum, default_value_t = Reference::HostTool)]
    reference: Reference,
    /// Seed of the device's prompt (decimal or 0x hex) [default: the firmware's].
    #[arg(long)]
    seed: Option<String>,
    /// Fail if the device's accuracy with its induction heads ablated is not at least this much below
    /// the clean accuracy (0 for a model without induction heads).
    #[arg(long, default_value_t = 0.5)]
    min_ablation_drop: f32,
    /// Skip the thumbv6m-none-eabi build check of the core crate.
    #[arg(long)]
    skip_thumbv6m: bool,
    /// Stack reserve in bytes instead of the board's `memory.x` (for models other than the shipped one,
    /// whose stacks are deeper); the RAM budget, set for the shipped model's reserve, is then reported
    /// but not checked. The stack margin is still checked.
    #[arg(long)]
    stack_reserve: Option<u32>,
}

/// Runs `cargo xtask firmware`.
pub fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let source = match (&args.blob, &args.checkpoint) {
        (Some(blob), _) => BlobSource::Given(blob.clone()),
        (None, checkpoint) => BlobSource::Convert {
            checkpoint: checkpoint
                .clone()
                .unwrap_or_else(|| root().join(DEFAULT_CHECKPOINT)),
            config: args.config.clone(),
            dtype: args.dtype.clone(),
        },
    };

    let toolchain = Toolchain::detect(TARGET, &firmware_dir());
    let mut packages = toolchain.packages().to_vec();
    if args.board == Board::Qemu {
        packages.push(QEMU);
    }
    timed("packages", || ensure_packages(&packages))?;

    let run_on_qemu = args.board == Board::Qemu;
    let needs_tool =
        source.needs_host_tool() || (run_on_qemu && args.reference == Reference::HostTool);
    let tool = if needs_tool {
        Some(timed("host tool", host_tool::build)?)
    } else {
        None
    };
    let blob = timed("blob", || source.resolve(tool.as_deref()))?;

    if !args.skip_thumbv6m {
        timed("thumbv6m check", thumbv6m::check)?;
    }
    let elf = timed("firmware build", || {
        build(
            toolchain,
            args.board,
            &blob,
            args.seed.as_deref(),
            args.stack_reserve,
        )
    })?;
    let sizes = elf_size::read(&elf)?;
    let budget = RamBudget::of(&blob)?;

    println!("blob={}", blob.display());
    let mut failures = Vec::new();
    if run_on_qemu {
        timed("defmt-print", defmt_print::ensure)?;
        eprintln!("xtask: running {} on QEMU mps2-an386", elf.display());
        let run = timed("QEMU run", || {
            qemu::run(&elf, Duration::from_secs(args.timeout))
        })?;
        print_sizes(&sizes);
        failures.extend(checked_budget(&budget, &sizes, &args));
        failures.extend(check_stack(&run.report, &sizes));
        match run.ending {
            Ending::Exited(status) if status.success() => {}
            Ending::Exited(status) => failures.push(format!("the firmware failed ({status})")),
            Ending::TimedOut => failures.push(format!(
                "the firmware did not exit within {} s",
                args.timeout
            )),
        }
        if !failures.is_empty() && !run.stderr.trim().is_empty() {
            eprintln!("{}", run.stderr.trim_end());
        }
        failures.extend(check(&run.report, &blob, tool.as_deref(), &args));
    } else {
        print_sizes(&sizes);
        failures.extend(checked_budget(&budget, &sizes, &args));
        eprintln!(
            "xtask: built {}; run it with `MICROLENS_BLOB={} cargo run --release --features {}` in firmware-example/",
            elf.display(),
            blob.display(),
            args.board.feature()
        );
    }
    eprintln!(
        "xtask: firmware done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(())
}

/// The RAM budget's failures, unless `--stack-reserve` replaced the reserve it was set for.
fn checked_budget(budget: &RamBudget, sizes: &elf_size::Sizes, args: &Args) -> Option<String> {
    match args.stack_reserve {
        Some(_) => {
            eprintln!("xtask: --stack-reserve given: the RAM budget is reported, not checked");
            None
        }
        None => budget.check(sizes),
    }
}

/// Runs one step of the command, reporting its duration on stderr.
fn timed<T>(step: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let start = Instant::now();
    let out = f();
    eprintln!("xtask: {step}: {:.1} s", start.elapsed().as_secs_f64());
    out
}

/// Builds the firmware for `board` with `blob` embedded; returns the ELF.
fn build(
    toolchain: Toolchain,
    board: Board,
    blob: &Path,
    seed: Option<&str>,
    stack_reserve: Option<u32>,
) -> Result<PathBuf> {
    let dir = firmware_dir();
    let target_dir = dir.join("target");
    eprintln!(
        "xtask: building the firmware for {} ({})",
        board.feature(),
        toolchain.describe()
    );
    let features = blob_features(blob)?;
    eprintln!("xtask: microlens capabilities of the blob: {features}");
    let mut cmd = toolchain.cargo_build(TARGET, &dir);
    cmd.arg("--no-default-features")
        .args(["--features", &format!("{},{features}", board.feature())])
        .arg("--target-dir")
        .arg(&target_dir)
        .env("MICROLENS_BLOB", blob)
        // The firmware's rustflags (linker scripts) live in its .cargo/config.toml: keep them in force.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS");
    match seed {
        Some(seed) => cmd.env("MICROLENS_SEED", seed),
        None => cmd.env_remove("MICROLENS_SEED"),
    };
    match stack_reserve {
        Some(bytes) => cmd.env("MICROLENS_STACK_RESERVE", bytes.to_string()),
        None => cmd.env_remove("MICROLENS_STACK_RESERVE"),
    };
    run_status(&mut cmd)?;
    Ok(target_dir.join(TARGET).join("release").join(BIN))
}

/// The microlens capabilities (firmware features) `blob` needs, comma-separated: the firmware is built
/// with these only, so the code for the others is not in its flash.
fn blob_features(blob: &Path) -> Result<String> {
    let bytes = std::fs::read(blob).with_context(|| format!("cannot read {}", blob.display()))?;
    let model = microlens::Model::from_bytes(&bytes)?;
    Ok(model.features().names().join(","))
}

fn print_sizes(s: &elf_size::Sizes) {
    println!("flash_bytes={}", s.flash());
    println!("ram_bytes={}", s.ram());
    println!("text_bytes={}", s.text);
    println!("rodata_bytes={}", s.rodata);
    println!("data_bytes={}", s.data);
    println!("bss_bytes={}", s.bss);
    println!("stack_reserve_bytes={}", s.stack_reserve);
}

/// The RAM budget for a blob: its KV cache and workspace (the activations) plus 2 KiB.
struct RamBudget {
    kv: u64,
    workspace: u64,
}

/// What the budget allows beyond the KV cache and the activations.
const RAM_ALLOWANCE: u64 = 2048;

impl RamBudget {
    fn of(blob: &Path) -> Result<Self> {
        let bytes =
            std::fs::read(blob).with_context(|| format!("cannot read {}", blob.display()))?;
        let model = microlens::Model::from_bytes(&bytes)?;
        Ok(RamBudget {
            kv: 4 * model.kv_cache_len() as u64,
            workspace: 4 * model.workspace_len() as u64,
        })
    }

    /// Prints the budget and returns a failure if `ram_bytes` exceeds it.
    fn check(&self, sizes: &elf_size::Sizes) -> Option<String> {
        let budget = self.kv + self.workspace + RAM_ALLOWANCE;
        println!("kv_bytes={}", self.kv);
        println!("workspace_bytes={}", self.workspace);
        println!("ram_budget_bytes={budget}");
        let over = sizes.ram().saturating_sub(budget);
        println!("ram_over_budget_bytes={over}");
        (over > 0).then(|| {
            format!(
                "ram_bytes {} exceeds kv + workspace + {RAM_ALLOWANCE} = {budget} by {over} B",
                sizes.ram()
            )
        })
    }
}

/// Stack the reserve must keep free beyond the measured high-water mark: one exception taken at the
/// deepest point, with the floating-point context (the 26-word extended frame, 104 B) and its handler's
/// own push (8 B for the QEMU board's SysTick).
const STACK_MARGIN: u64 = 112;

/// The device's stack high-water mark against the stack reserve of `memory.x`: it must stay
/// [`STACK_MARGIN`] below. Prints the margin; returns what failed.
fn check_stack(report: &Report, sizes: &elf_size::Sizes) -> Option<String> {
    let used = match report.parse::<u64>("stack_bytes") {
        Ok(used) => used,
        Err(e) => return Some(format!("{e:#}")),
    };
    let margin = sizes.stack_reserve.saturating_sub(used);
    println!("stack_margin_bytes={margin}");
    (used + STACK_MARGIN > sizes.stack_reserve).then(|| {
        format!(
            "stack high-water mark {used} B leaves less than {STACK_MARGIN} B of the {} B stack reserve",
            sizes.stack_reserve
        )
    })
}

/// The device against the host: the same logits hash for its prompt, and accuracy at least the minimum.
/// Returns what failed.
fn check(report: &Report, blob: &Path, tool: Option<&Path>, args: &Args) -> Vec<String> {
    let mut failures = Vec::new();
    if let Err(e) = print_macs(report, blob) {
        failures.push(format!("{e:#}"));
    }
    let hashes = report.prompt().and_then(|prompt| {
        let device = report.logits_hash()?;
        let host = match (args.reference, tool) {
            (Reference::HostTool, Some(tool)) => reference::host_tool_hash(tool, blob, &prompt)?,
            _ => reference::core_hash(blob, &prompt)?,
        };
        println!("host_logits_hash={host:016x}");
        Ok((device, host))
    });
    match hashes {
        Ok((device, host)) if device != host => failures.push(format!(
            "logits hashes differ: device {device:016x}, host {host:016x}"
        )),
        Ok(_) => {}
        Err(e) => failures.push(format!("{e:#}")),
    }
    match report.parse::<f32>("accuracy") {
        Ok(a) if a < args.min_accuracy => failures.push(format!(
            "accuracy {a} is below --min-accuracy {}",
            args.min_accuracy
        )),
        Ok(_) => {}
        Err(e) => failures.push(format!("{e:#}")),
    }
    let drop = report
        .parse::<f32>("accuracy")
        .and_then(|clean| Ok(clean - report.parse::<f32>("ablated_accuracy")?));
    match drop {
        Ok(d) if d < args.min_ablation_drop => failures.push(format!(
            "ablating the induction heads costs {d} accuracy, less than --min-ablation-drop {}",
            args.min_ablation_drop
        )),
        Ok(_) => {}
        Err(e) => failures.push(format!("{e:#}")),
    }
    failures
}

/// Prints `macs_per_token=` (the multiply-accumulates of the prompt's tokens, mean over the prompt:
/// per layer the four projections and the MLP, the attention scores and mix over the positions so far,
/// and the unembedding) and `instructions_per_mac=` from the device's `instructions_per_token=`.
fn print_macs(report: &Report, blob: &Path) -> Result<()> {
    let bytes = std::fs::read(blob).with_context(|| format!("cannot read {}", blob.display()))?;
    let model = microlens::Model::from_bytes(&bytes)?;
    let c = model.config();
    let n = report.prompt()?.len().max(1) as u64;
    let (d_model, d_attn) = (c.d_model as u64, c.d_attn() as u64);
    let per_layer = 4 * d_model * d_attn + 2 * d_model * c.d_mlp_or_zero() as u64;
    // Scores and mix: 2 d_attn per position seen, positions 1..=n on average (n + 1) / 2.
    let attention = 2 * d_attn * n * (n + 1) / 2;
    let total = n * (c.n_layers as u64 * per_layer + d_model * c.d_vocab_out as u64)
        + c.n_layers as u64 * attention;
    let macs = total as f64 / n as f64;
    println!("macs_per_token={macs:.0}");
    if let Ok(instructions) = report.parse::<f64>("instructions_per_token") {
        println!("instructions_per_mac={:.2}", instructions / macs);
    }
    Ok(())
}
