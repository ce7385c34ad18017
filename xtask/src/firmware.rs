//! `cargo xtask firmware`: host tool, blob, firmware build, QEMU run, sizes and the host cross-check.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::blob_source::BlobSource;
pub use crate::boards::Board;
use crate::boards::{IntegerBudget, Runs, Spec};
use crate::device::Report;
use crate::paths::{firmware_dir, root};
use crate::reference::Reference;
use crate::toolchain::{ensure_packages, run_status, Toolchain};
use crate::{defmt_print, elf_size, host_tool, models, qemu, reference, thumbv6m};

/// The firmware's binary name.
const BIN: &str = "microlens-firmware-example";
/// The trained model the firmware ships with (converted to `--dtype`): the first shipped model.
pub const DEFAULT_CHECKPOINT: &str = models::SHIPPED[0].checkpoint;

/// Arguments of `cargo xtask firmware`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Embed this blob as it is, instead of converting a checkpoint.
    #[arg(long, conflicts_with_all = ["checkpoint", "model"])]
    blob: Option<PathBuf>,
    /// Checkpoint to convert with `microlens convert` [default: the `--model`'s].
    #[arg(long, conflicts_with = "model")]
    checkpoint: Option<PathBuf>,
    /// A shipped model by name: `induction` (the token model, the default), `bytes` (the byte-level
    /// model, which also prints its prompt and greedy continuation as text) or `stories` (the
    /// LLaMA-family story model, which continues a story's first sentence).
    #[arg(long, default_value = models::SHIPPED[0].name)]
    model: String,
    /// Config JSON of the checkpoint [default: <checkpoint stem>.json beside it if it exists, else
    /// config.json beside it].
    #[arg(long, conflicts_with = "blob")]
    config: Option<PathBuf>,
    /// Storage type of the converted matrices (f32, f16, i8, i4, i8g).
    #[arg(long, default_value = "i8", conflicts_with = "blob")]
    dtype: String,
    /// Activation arithmetic of the converted blob with i8/i4/i8g matrices: i8 (W8A8) or i16 (W8A16)
    /// [default: the dtype's, i8].
    #[arg(long, conflicts_with = "blob")]
    activations: Option<String>,
    /// KV cache of a converted W8A16 blob: i8 or i16 [default: i8].
    #[arg(long, conflicts_with = "blob")]
    kv: Option<String>,
    /// Arithmetic of the converted blob: float or integer (integer-only, with i8 matrices)
    /// [default: float].
    #[arg(long, conflicts_with = "blob")]
    arith: Option<String>,
    /// Lookup tables of a converted W8A16 blob: i8, i8g or f16 [default: as the matrices].
    #[arg(long, conflicts_with = "blob")]
    tables: Option<String>,
    /// Rounding of a converted blob's integer weights: gptq or nearest [default: convert's].
    #[arg(long, conflicts_with = "blob")]
    rounding: Option<String>,
    /// Board to build for: an emulated one (its QEMU machine) is run and checked, a real one built and
    /// measured.
    #[arg(long, value_enum, default_value_t = Board::Mps2An386)]
    pub board: Board,
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
    /// A fact model's prompt (token ids `s1,s2,r`): the firmware also runs it and prints the token it
    /// recalls, checked against the host's `microlens generate` (instead of the induction accuracy and
    /// ablation thresholds, which a fact model does not meet).
    #[arg(long)]
    fact_prompt: Option<String>,
    /// A text prompt, encoded by the blob's tokenizer (`microlens run --text`): the firmware's prompt is
    /// its tokens twice, and it continues them greedily; the continuation is checked against the host's
    /// and printed decoded [default: the `--model`'s own, for a model with a tokenizer].
    #[arg(long, conflicts_with = "fact_prompt")]
    text_prompt: Option<String>,
    /// Fail unless the recalled token (`--fact-prompt`) is this one.
    #[arg(long, requires = "fact_prompt")]
    expect_recall: Option<u32>,
}

/// What a passing `cargo xtask firmware` measured.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// Flash: text + rodata + data.
    pub flash: u64,
    /// RAM: data + bss + the stack reserve.
    pub ram: u64,
    /// The session's context (positions).
    pub context: u64,
    /// Instructions per token (emulated boards).
    pub instructions_per_token: Option<u64>,
    /// Multiply-accumulates per token (emulated boards).
    pub macs_per_token: Option<u64>,
}

/// What a firmware build produced, and what it is checked against.
struct Built {
    /// The embedded blob.
    blob: PathBuf,
    /// The host tool, if one was built (the host's reference for the checks).
    tool: Option<PathBuf>,
    /// The firmware ELF.
    elf: PathBuf,
    /// Its sizes.
    sizes: elf_size::Sizes,
    /// Its RAM budget.
    budget: RamBudget,
    /// A named model's own stack reserve (`None` for the board's).
    model_reserve: Option<u32>,
    /// The named model's flash and RAM budget (checked with its own stack reserve).
    limits: models::Limits,
    /// The tokenizer file of a converted checkpoint (`tokenizer.bin` or `tokenizer.json` beside it), for
    /// the host tool's text of a blob that lies elsewhere.
    tokenizer: Option<PathBuf>,
}

/// Runs `cargo xtask firmware`.
pub fn run(args: Args) -> Result<Outcome> {
    let started = Instant::now();
    let spec = args.board.spec();
    let built = prepare(&args, spec)?;
    println!("board={} ({})", args.board.name(), spec.core);
    println!("blob={}", built.blob.display());
    let mut outcome = Outcome {
        flash: built.sizes.flash(),
        ram: built.sizes.ram(),
        context: built.sizes.context,
        instructions_per_token: None,
        macs_per_token: None,
    };
    let failures = match spec.runs {
        Runs::Qemu { .. } => run_emulated(&args, spec.runs, &built, &mut outcome)?,
        Runs::Probe { chip } => {
            print_sizes(&built.sizes);
            eprintln!(
                "xtask: built {}; flash and run it with `probe-rs run --chip {chip} {}`",
                built.elf.display(),
                built.elf.display()
            );
            checked_budget(
                &built.budget,
                &built.sizes,
                &args,
                built.model_reserve,
                built.limits,
            )
            .into_iter()
            .collect()
        }
    };
    eprintln!(
        "xtask: firmware done in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if !failures.is_empty() {
        bail!("{}", failures.join("; "));
    }
    Ok(outcome)
}

/// Packages, the host tool, the blob (converted or given), the thumbv6m check and the firmware build.
fn prepare(args: &Args, spec: Spec) -> Result<Built> {
    let named = models::by_name(&args.model)?;
    // A named model's own stack reserve, unless a blob or checkpoint replaces it or one is given.
    let model_reserve = match (&args.blob, &args.checkpoint) {
        (None, None) => named.stack_reserve,
        _ => None,
    };
    let limits = named.limits;
    let source = match &args.blob {
        Some(blob) => BlobSource::Given(blob.clone()),
        None => BlobSource::Convert {
            checkpoint: args
                .checkpoint
                .clone()
                .unwrap_or_else(|| root().join(named.checkpoint)),
            config: args.config.clone(),
            dtype: args.dtype.clone(),
            options: [
                ("--activations", &args.activations),
                ("--kv", &args.kv),
                ("--arith", &args.arith),
                ("--tables", &args.tables),
                ("--rounding", &args.rounding),
            ]
            .into_iter()
            .filter_map(|(f, v)| v.clone().map(|v| (f, v)))
            .collect(),
        },
    };

    let toolchain = Toolchain::detect(spec.target, &firmware_dir());
    let mut packages = toolchain.packages().to_vec();
    if let Runs::Qemu { system, .. } = spec.runs {
        packages.push(system);
    }
    timed("packages", || ensure_packages(&packages))?;

    let text = args
        .text_prompt
        .as_deref()
        .or(match (&args.blob, &args.checkpoint) {
            (None, None) => named.text_prompt,
            _ => None,
        });
    let needs_tool = source.needs_host_tool()
        || text.is_some()
        || (args.board.emulated() && args.reference == Reference::HostTool);
    let tool = if needs_tool {
        Some(timed("host tool", host_tool::build)?)
    } else {
        None
    };
    let blob = timed("blob", || source.resolve(tool.as_deref()))?;
    let tokenizer = match &source {
        BlobSource::Convert { checkpoint, .. } => ["tokenizer.json", "tokenizer.bin"]
            .map(|n| checkpoint.with_file_name(n))
            .into_iter()
            .find(|p| p.is_file()),
        BlobSource::Given(_) => None,
    };
    let text_prompt = match (text, &tool) {
        (Some(text), Some(tool)) => {
            let ids = reference::host_tool_tokens(tool, &blob, text, tokenizer.as_deref())?;
            let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
            Some(ids.join(","))
        }
        _ => None,
    };
    // An int8 or int4 blob without a reserve of its own (the shipped model's, or one whose stack is as
    // shallow; deeper models pass `--stack-reserve`), on a board with an integer budget: that budget's
    // shallower stack reserve and allowance (the f16 build's deeper stack sets memory.x's).
    let (integer_matrices, arith_integer, int4) = integer_blob(&blob)?;
    let integer = match (args.stack_reserve, model_reserve, spec.integer_budget) {
        (None, None, Some(budget)) if integer_matrices && !arith_integer => Some(budget),
        // The integer-only arithmetic: its own reserve, and RAM beyond the cache and workspace for
        // that reserve and at most 512 B of statics (the shipped model's are 368 B).
        (None, None, _) if arith_integer => spec.arith_integer_reserve.map(|r| {
            let r = r[usize::from(int4)];
            IntegerBudget {
                stack_reserve: r,
                ram_allowance: u64::from(r) + 512,
            }
        }),
        _ => None,
    };
    let stack_reserve = integer
        .map(|b| b.stack_reserve)
        .or(args.stack_reserve)
        .or(model_reserve);
    let allowance = integer.map_or(spec.ram_allowance, |b| b.ram_allowance);

    if !args.skip_thumbv6m {
        timed("thumbv6m check", thumbv6m::check)?;
    }
    let elf = timed("firmware build", || {
        build(
            toolchain,
            args.board,
            spec,
            &blob,
            args.seed.as_deref(),
            stack_reserve,
            args.fact_prompt.as_deref(),
            text_prompt.as_deref(),
            false,
        )
    })?;
    let sizes = elf_size::read(&elf)?;
    let budget = RamBudget::of(&blob, &sizes, allowance)?;
    Ok(Built {
        blob,
        tool,
        elf,
        sizes,
        budget,
        model_reserve,
        limits,
        tokenizer,
    })
}

/// Runs the firmware on QEMU and checks it: budget, stack, exit, the host's hashes and accuracy, the
/// window pass. Returns the failures; fills in the outcome's instruction counts.
fn run_emulated(
    args: &Args,
    runs: Runs,
    built: &Built,
    outcome: &mut Outcome,
) -> Result<Vec<String>> {
    let Runs::Qemu { machine, .. } = runs else {
        bail!("not an emulated board");
    };
    timed("defmt-print", defmt_print::ensure)?;
    let command = qemu::command(runs, None, &built.elf)?;
    eprintln!("xtask: running {} on QEMU {machine}", built.elf.display());
    let run = timed("QEMU run", || {
        qemu::run(command, &built.elf, Duration::from_secs(args.timeout))
    })?;
    print_sizes(&built.sizes);
    print_per_mac(&run.report);
    outcome.instructions_per_token = run.report.parse("instructions_per_token").ok();
    outcome.macs_per_token = run.report.parse("macs_per_token").ok();
    let mut failures: Vec<String> = checked_budget(
        &built.budget,
        &built.sizes,
        args,
        built.model_reserve,
        built.limits,
    )
    .into_iter()
    .collect();
    failures.extend(check_stack(&run.report, &built.sizes));
    failures.extend(run.ending.failure(args.timeout));
    if !failures.is_empty() && !run.stderr.trim().is_empty() {
        eprintln!("{}", run.stderr.trim_end());
    }
    let tool = built.tool.as_deref();
    failures.extend(check(&run.report, built, args));
    let capped = built.budget.context < built.budget.n_ctx;
    failures.extend(check_window(&run.report, &built.blob, tool, args, capped));
    Ok(failures)
}

/// The RAM budget's failures: the first model's (KV cache + workspace + allowance) with the board's
/// stack reserve; with a named model's own reserve, the device budget (flash and RAM limits); with
/// `--stack-reserve`, none (reported only).
fn checked_budget(
    budget: &RamBudget,
    sizes: &elf_size::Sizes,
    args: &Args,
    model_reserve: Option<u32>,
    limits: models::Limits,
) -> Option<String> {
    match (args.stack_reserve, model_reserve) {
        (Some(_), _) => {
            eprintln!("xtask: --stack-reserve given: the RAM budget is reported, not checked");
            None
        }
        (None, Some(_)) => {
            let (flash, ram) = (sizes.flash(), sizes.ram());
            println!(
                "device_budget=flash {flash} of {} B, RAM {ram} of {} B",
                limits.flash, limits.ram
            );
            (flash > limits.flash || ram > limits.ram).then(|| {
                format!(
                    "flash {flash} B or RAM {ram} B exceeds the device budget ({} B, {} B)",
                    limits.flash, limits.ram
                )
            })
        }
        (None, None) => budget.check(sizes),
    }
}

/// Runs one step of the command, reporting its duration on stderr.
fn timed<T>(step: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let start = Instant::now();
    let out = f();
    eprintln!("xtask: {step}: {:.1} s", start.elapsed().as_secs_f64());
    out
}

/// The executable of a QEMU package.
pub fn system_binary(package: &str) -> &'static str {
    match package {
        "qemu-system-misc" => "qemu-system-riscv32",
        _ => "qemu-system-arm",
    }
}

/// Prints the cost per multiply-accumulate: the cost per token over `macs_per_token`.
fn print_per_mac(report: &Report) {
    let cost = report
        .parse::<f64>("instructions_per_token")
        .or_else(|_| report.parse::<f64>("cycles_per_token"));
    if let (Ok(cost), Ok(macs)) = (cost, report.parse::<f64>("macs_per_token")) {
        println!("instructions_per_mac={:.3}", cost / macs.max(1.0));
    }
}

/// The cargo arguments giving the board's rustflags beyond its target's (`--config
/// target.<target>.rustflags=[...]`), none if it has none.
pub fn board_rustflags(spec: Spec) -> Vec<String> {
    if spec.rustflags.is_empty() {
        return Vec::new();
    }
    let flags: Vec<String> = spec.rustflags.iter().map(|f| format!("{f:?}")).collect();
    // Unquoted: cargo reads `target.thumbv8m.main-none-eabihf` as nested tables, as in config.toml;
    // the array is appended to the config file's, so a later `-C target-cpu` wins.
    vec![
        "--config".into(),
        format!("target.{}.rustflags=[{}]", spec.target, flags.join(",")),
    ]
}

/// Builds the firmware for `board` with `blob` embedded, in serve mode if `serve` (with every hook point
/// compiled in); returns the ELF, copied to `target/boards/<board>-<blob stem>[-serve]` so that builds
/// for other boards and blobs leave it alone.
#[allow(clippy::too_many_arguments)]
pub fn build(
    toolchain: Toolchain,
    board: Board,
    spec: Spec,
    blob: &Path,
    seed: Option<&str>,
    stack_reserve: Option<u32>,
    fact_prompt: Option<&str>,
    text_prompt: Option<&str>,
    serve: bool,
) -> Result<PathBuf> {
    // One build at a time: builds for one target share `release/BIN` until it is copied out.
    let _one_build = BUILD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = firmware_dir();
    let target_dir = dir.join("target");
    eprintln!(
        "xtask: building the firmware for {} ({}, {})",
        board.name(),
        spec.target,
        toolchain.describe()
    );
    let features = blob_features(blob)?;
    eprintln!("xtask: microlens capabilities of the blob: {features}");
    let mut cmd = toolchain.cargo_build(spec.target, &dir);
    cmd.args(board_rustflags(spec));
    let serve_feature = if serve { ",serve" } else { "" };
    cmd.arg("--no-default-features")
        .args([
            "--features",
            &format!("{}{serve_feature},{features}", board.name()),
        ])
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
    match fact_prompt {
        Some(tokens) => cmd.env("MICROLENS_FACT_PROMPT", tokens),
        None => cmd.env_remove("MICROLENS_FACT_PROMPT"),
    };
    match text_prompt {
        Some(tokens) => cmd.env("MICROLENS_TEXT_PROMPT", tokens),
        None => cmd.env_remove("MICROLENS_TEXT_PROMPT"),
    };
    match stack_reserve {
        Some(bytes) => cmd.env("MICROLENS_STACK_RESERVE", bytes.to_string()),
        None => cmd.env_remove("MICROLENS_STACK_RESERVE"),
    };
    if serve {
        // Every hook point, for `Read` (the demo's config.toml compiles in only the two it uses).
        let all: Vec<&str> = microlens::HookKind::ALL
            .iter()
            .map(|k| k.suffix())
            .collect();
        cmd.env("MICROLENS_HOOK_POINTS", all.join(","));
    }
    run_status(&mut cmd)?;
    let built = target_dir.join(spec.target).join("release").join(BIN);
    let stem = blob.file_stem().and_then(|s| s.to_str()).unwrap_or("blob");
    let boards = target_dir.join("boards");
    std::fs::create_dir_all(&boards)
        .with_context(|| format!("cannot create {}", boards.display()))?;
    let suffix = if serve { "-serve" } else { "" };
    let elf = boards.join(format!("{}-{stem}{suffix}", board.name()));
    std::fs::copy(&built, &elf)
        .with_context(|| format!("cannot copy {} to {}", built.display(), elf.display()))?;
    Ok(elf)
}

/// Held by [`build`] from the cargo build until its ELF is copied to `boards/`, so that builds started
/// from several threads (the serve checks of `cargo xtask test`) do not take each other's binary.
static BUILD_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether every matrix of `blob` is int8 (per row or per group) or int4, whether it computes in the
/// integer-only arithmetic (`--arith integer`), and whether it has int4 matrices.
fn integer_blob(blob: &Path) -> Result<(bool, bool, bool)> {
    let bytes = std::fs::read(blob).with_context(|| format!("cannot read {}", blob.display()))?;
    let model = microlens::Model::from_bytes(&bytes)?;
    let features = model.features();
    let weights = || {
        features
            .names()
            .iter()
            .filter(|n| n.starts_with("weights-"))
    };
    let matrices = weights().all(|n| matches!(*n, "weights-i8" | "weights-i4" | "weights-i8g"));
    Ok((
        matrices,
        model.activations() == microlens::Activations::Integer,
        weights().any(|n| *n == "weights-i4"),
    ))
}

/// The microlens capabilities (firmware features) `blob` needs, comma-separated: the firmware is built
/// with these only, so the code for the others is not in its flash.
fn blob_features(blob: &Path) -> Result<String> {
    let bytes = std::fs::read(blob).with_context(|| format!("cannot read {}", blob.display()))?;
    let model = microlens::Model::from_bytes(&bytes)?;
    Ok(model.features().names().join(","))
}

/// Prints the ELF's sizes as `key=value` lines.
pub fn print_sizes(s: &elf_size::Sizes) {
    println!("flash_bytes={}", s.flash());
    println!("ram_bytes={}", s.ram());
    println!("text_bytes={}", s.text);
    println!("rodata_bytes={}", s.rodata);
    println!("data_bytes={}", s.data);
    println!("bss_bytes={}", s.bss);
    println!("stack_reserve_bytes={}", s.stack_reserve);
}

/// The RAM budget for a blob: its KV cache and workspace (the activations) plus about 2 KiB
/// (the board's [`Spec::ram_allowance`]). On a
/// board whose RAM cannot hold the full context's KV cache (the firmware's `build.rs` caps the context
/// to fill it), the budget is the board's RAM.
struct RamBudget {
    context: u64,
    n_ctx: u64,
    kv: u64,
    workspace: u64,
    board_ram: u64,
    allowance: u64,
}

impl RamBudget {
    fn of(blob: &Path, sizes: &elf_size::Sizes, allowance: u64) -> Result<Self> {
        let bytes =
            std::fs::read(blob).with_context(|| format!("cannot read {}", blob.display()))?;
        let model = microlens::Model::from_bytes(&bytes)?;
        let context = sizes.context;
        let n = usize::try_from(context)?;
        Ok(RamBudget {
            context,
            n_ctx: model.config().n_ctx as u64,
            board_ram: sizes.board_ram,
            allowance,
            kv: 4 * model.kv_cache_len_at(n) as u64,
            workspace: 4 * model.workspace_len_at(n) as u64,
        })
    }

    /// Prints the budget and returns a failure if `ram_bytes` exceeds it.
    fn check(&self, sizes: &elf_size::Sizes) -> Option<String> {
        let capped = self.context < self.n_ctx;
        let (budget, rule) = match capped {
            false => (
                self.kv + self.workspace + self.allowance,
                format!("kv + workspace + {}", self.allowance),
            ),
            true => (self.board_ram, "the board's RAM (context capped)".into()),
        };
        println!("context={}", self.context);
        println!("kv_bytes={}", self.kv);
        println!("workspace_bytes={}", self.workspace);
        println!("ram_budget_bytes={budget} ({rule})");
        let over = sizes.ram().saturating_sub(budget);
        println!("ram_over_budget_bytes={over}");
        (over > 0).then(|| {
            format!(
                "ram_bytes {} exceeds {rule} = {budget} by {over} B",
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

/// On a board whose context is capped, the device streams its prompt twice through a sliding window of
/// the cap: the same logits hash as the host's window over the same stream. Returns what failed.
fn check_window(
    report: &Report,
    blob: &Path,
    tool: Option<&Path>,
    args: &Args,
    capped: bool,
) -> Option<String> {
    let width = match (report.parse::<usize>("window"), capped) {
        (Ok(width), _) => width,
        (Err(_), false) => return None,
        (Err(e), true) => return Some(format!("context capped, but {e:#}")),
    };
    let hashes = report.prompt().and_then(|prompt| {
        let stream: Vec<u32> = prompt.iter().chain(&prompt).copied().collect();
        let text = report
            .value("window_logits_hash")
            .context("the device printed no window_logits_hash=")?;
        let device = u64::from_str_radix(text, 16)
            .with_context(|| format!("bad window_logits_hash={text}"))?;
        let host = match (args.reference, tool) {
            (Reference::HostTool, Some(tool)) => {
                reference::host_tool_window_hash(tool, blob, &stream, width)?
            }
            _ => reference::core_window_hash(blob, &stream, width)?,
        };
        println!("host_window_logits_hash={host:016x}");
        Ok((device, host))
    });
    match hashes {
        Ok((device, host)) if device != host => Some(format!(
            "window logits hashes differ: device {device:016x}, host {host:016x}"
        )),
        Ok(_) => None,
        Err(e) => Some(format!("{e:#}")),
    }
}

/// The device against the host: the same logits hash for its prompt, the same greedy continuation (a
/// byte-level model's `continuation=`), and accuracy at least the minimum.
/// Returns what failed.
fn check(report: &Report, built: &Built, args: &Args) -> Vec<String> {
    let (blob, tool) = (built.blob.as_path(), built.tool.as_deref());
    let mut failures = Vec::new();
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
    if let Some(device) = report.tokens("continuation") {
        let host = device.and_then(|device| {
            let prompt = report.prompt()?;
            let host = match tool {
                Some(tool) => {
                    let (host, text) = reference::host_tool_generate(
                        tool,
                        blob,
                        &prompt,
                        device.len(),
                        built.tokenizer.as_deref(),
                    )?;
                    if let Some(text) = text {
                        println!("continuation_text={text:?}");
                    }
                    host
                }
                None => reference::core_continuation(blob, &prompt, device.len())?,
            };
            Ok((device, host))
        });
        match host {
            Ok((device, host)) if device != host => failures.push(format!(
                "continuations differ: device {device:?}, host {host:?}"
            )),
            Ok(_) => println!("host_continuation=same"),
            Err(e) => failures.push(format!("{e:#}")),
        }
    }
    failures.extend(check_recall(report, blob, tool, args));
    if args.fact_prompt.is_some() {
        // A fact model: its recall is the check; the induction prompt's figures are only reported.
        return failures;
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

/// With `--fact-prompt`: the device's `recalled=` token against the host's greedy next token for its
/// `fact_prompt=`, and against `--expect-recall`.
fn check_recall(report: &Report, blob: &Path, tool: Option<&Path>, args: &Args) -> Option<String> {
    args.fact_prompt.as_ref()?;
    let checked = (|| {
        let device = report.parse::<u32>("recalled")?;
        let prompt = report
            .tokens("fact_prompt")
            .context("the device printed no fact_prompt=")??;
        let host = match tool {
            Some(tool) => reference::host_tool_continuation(tool, blob, &prompt, 1)?,
            None => reference::core_continuation(blob, &prompt, 1)?,
        };
        println!(
            "host_recalled={}",
            host.first().copied().unwrap_or(u32::MAX)
        );
        if host != [device] {
            bail!("recalled tokens differ: device {device}, host {host:?}");
        }
        match args.expect_recall {
            Some(want) if want != device => bail!("recalled {device}, not --expect-recall {want}"),
            _ => Ok(()),
        }
    })();
    checked.err().map(|e| format!("{e:#}"))
}
