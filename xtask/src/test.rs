//! `cargo xtask test`: every test the project has, as CI runs it (`.ci/run` calls exactly this).
//!
//! Formatting, clippy with warnings denied (inside the builds, [`crate::lint`]), the workspace's tests,
//! the Python package's pytest suite (`bindings/python`, in a virtual environment it makes), the shipped
//! induction model trained again from its recipe (byte for byte), `microlens report`'s page in headless
//! Chromium, the core's docs with warnings denied, the core crate without `std` or `alloc`, the host
//! tool's features against the tests' (one build for both), the compile-time crates (proc macros)
//! unoptimised, the core's tests on 32-bit (i686), the thumbv6m build, the firmware on every emulated
//! board checked against the host (the shipped model as int8 and as f32), fixtures with norms, MLPs,
//! sinusoidal and LLaMA-shaped models on the Cortex-M4F, M55 and RISC-V, the shipped model as int4, f16
//! and W8A16 (and a fixture as int4), the byte-level model (its continuation checked too) and a
//! ROME-edited fact model (its recall checked) on the Cortex-M4F, `cargo run` in the firmware example on
//! the Cortex-M4F (its default blob checked to be the shipped model's current conversion), serve mode on
//! the Cortex-M4F, the STM32F405 and the Cortex-M0 at once (the device's hash, activation cache and
//! fidelity report against the host's; 10,000 corrupted frames on the M4F), every board two at a time
//! (the real boards' builds with their sizes and budgets), the demo (`cargo xtask demo`) through, and
//! every fuzz target replayed on its seed corpus and mutants. The host-side steps that need no firmware
//! run in a second process beside the firmware steps ([`crate::beside_firmware`]). Every step runs even
//! if an earlier one failed; the last line counts them.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::blob_source::BlobSource;
use crate::boards::Board;
use crate::paths::root;
use crate::toolchain::run_status;
use crate::{firmware, host_tool, matrix, thumbv6m};

/// One step: a name, what it runs, and whether a full run runs it beside the firmware steps (in a
/// second process, [`crate::beside_firmware`]).
struct Step {
    name: String,
    beside: bool,
    run: Box<dyn Fn() -> Result<()>>,
}

fn cargo_command() -> Command {
    crate::paths::cargo()
}

fn cargo(args: &'static [&'static str]) -> Box<dyn Fn() -> Result<()>> {
    Box::new(move || run_status(cargo_command().args(args)))
}

/// Packages of a `cargo tree` line (`name vX [feat,feat]`) that enable `std` or `alloc`.
fn std_or_alloc(tree: &str) -> Vec<&str> {
    tree.lines()
        .filter(|line| {
            let features = line
                .rsplit_once('[')
                .map_or("", |(_, f)| f.trim_end_matches([']', ' ', '(', '*', ')']));
            features.split(',').any(|f| f == "std" || f == "alloc")
        })
        .collect()
}

/// `cargo tree ARGS --format "{p} [{f}]" --prefix none`: one line per package with its features.
fn cargo_tree(args: &[&str]) -> Result<String> {
    let out = cargo_command()
        .arg("tree")
        .args(args)
        .args(["--format", "{p} [{f}]", "--prefix", "none"])
        .output()
        .context("running cargo tree")?;
    if !out.status.success() {
        bail!(
            "cargo tree failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The core without default features, and the wire protocol the firmware shares with the host, must
/// have no `std` and no `alloc` feature anywhere in their (non-proc-macro) dependency trees.
fn no_std_no_alloc() -> Result<()> {
    for package in ["microlens", "microlens-protocol"] {
        let tree = cargo_tree(&[
            "-p",
            package,
            "--no-default-features",
            "-e",
            "normal,no-proc-macro",
        ])?;
        let bad = std_or_alloc(&tree);
        if !bad.is_empty() {
            bail!(
                "the no_std {package} pulls std or alloc:\n{}",
                bad.join("\n")
            );
        }
        println!("{package} --no-default-features: no std, no alloc in its tree");
    }
    Ok(())
}

/// Lines of `tool` (a `cargo tree` of the host tool's build) missing from `tests` (the workspace's
/// tests): packages whose features differ, which cargo would build twice.
fn unshared<'a>(tool: &'a str, tests: &str) -> Vec<&'a str> {
    let tests: BTreeSet<&str> = tests.lines().map(|l| l.trim_end_matches(" (*)")).collect();
    let tool: BTreeSet<&'a str> = tool.lines().map(|l| l.trim_end_matches(" (*)")).collect();
    tool.into_iter().filter(|l| !tests.contains(l)).collect()
}

/// `name vX` of a `cargo tree` line (`name vX [feat,feat]`).
fn package_of(line: &str) -> &str {
    line.split(" [").next().unwrap_or(line)
}

/// `package`'s build (`what`) and `cargo test` (the default members) resolve the same features for
/// every package both build (`package`'s own extra ones aside), so cargo compiles those once.
fn shares_test_build(package: &str, what: &str) -> Result<()> {
    let build = cargo_tree(&["-p", package, "-e", "normal,build"])?;
    let tests = cargo_tree(&["-e", "normal,build,dev"])?;
    let built: BTreeSet<&str> = tests.lines().map(package_of).collect();
    let differ: Vec<&str> = unshared(&build, &tests)
        .into_iter()
        .filter(|l| built.contains(package_of(l)))
        .collect();
    if !differ.is_empty() {
        bail!(
            "{what}'s build resolves other features than the tests' (both would be compiled; name \
             the features in host-tools/Cargo.toml):\n{}",
            differ.join("\n")
        );
    }
    println!("{package}: {what} shares the tests' build of every package both use");
    Ok(())
}

/// Fixtures whose int8 paths the shipped attention-only model does not reach, run on QEMU for the
/// device-equals-host hash: LayerNorm with a GELU MLP (the centred hidden input), RMSNorm with rotary
/// and a SiLU MLP, sinusoidal positions (computed on the device in software `f64`), and a LLaMA-shaped
/// model (gated MLP, two key/value heads for four query heads). They are random models (no accuracy to
/// ask for) with deeper stacks.
const QEMU_FIXTURES: [&str; 4] = ["gpt2_like", "rotary_rms", "sinusoidal", "llama_tl"];

/// Stack reserve for [`QEMU_FIXTURES`] (their high-water marks on the M4F: 1,912, 2,520, 2,224 and
/// 2,440 B).
const FIXTURE_STACK_RESERVE: &str = "2800";

/// `cargo xtask firmware` arguments for a fixture: random models, so no accuracy to ask for, and
/// ablating their "induction heads" may as well help (the sinusoidal one); their deeper stacks.
const FIXTURE_ARGS: [&str; 5] = [
    "--min-accuracy",
    "0",
    "--min-ablation-drop=-1",
    "--stack-reserve",
    FIXTURE_STACK_RESERVE,
];

/// Boards the fixtures run on: the Cortex-M4F (the DSP kernels) and the Cortex-M55 (the Helium kernel).
const FIXTURE_BOARDS: [Board; 2] = [Board::Mps2An386, Board::Mps3An547];

/// Fixtures also run on a board without the DSP kernels: the LLaMA shape's gated MLP and shared
/// key/value heads through the portable Rust (RV32IMAC).
const FIXTURE_PORTABLE: [(&str, Board); 1] = [("llama_tl", Board::Riscv32Virt)];

/// `cargo xtask firmware` on each of [`QEMU_FIXTURES`] as int8, on each of [`FIXTURE_BOARDS`] and
/// [`FIXTURE_PORTABLE`]'s (each fixture converted once).
fn fixtures_on_qemu() -> Result<()> {
    let tool = host_tool::build()?;
    for name in QEMU_FIXTURES {
        let checkpoint = root()
            .join("tests/fixtures")
            .join(name)
            .join("model.safetensors");
        let blob = BlobSource::Convert {
            checkpoint,
            config: None,
            dtype: "i8".into(),
            options: Vec::new(),
        }
        .resolve(Some(&tool))?;
        let extra = FIXTURE_PORTABLE.iter().filter(|&&(n, _)| n == name);
        for board in FIXTURE_BOARDS.into_iter().chain(extra.map(|&(_, b)| b)) {
            firmware::run(matrix::firmware_args(board, &blob, &FIXTURE_ARGS))
                .with_context(|| format!("fixture {name} on {}", board.name()))?;
        }
    }
    Ok(())
}

/// `cargo xtask firmware --dtype i8 --activations i16` on the Cortex-M4F, then with a scale per group
/// of 8 (`--dtype i8g`, also on riscv32-virt), alone and with the int16 KV cache and `f16` tables:
/// W8A16's device hashes against the host's, with the shipped model's accuracy, ablation and RAM
/// budget.
fn w8a16_on_qemu() -> Result<()> {
    let tool = host_tool::build()?;
    let builds: [(&str, &[(&'static str, &str)]); 3] = [
        ("i8", &[("--activations", "i16")]),
        ("i8g", &[("--activations", "i16")]),
        (
            "i8g",
            &[
                ("--activations", "i16"),
                ("--kv", "i16"),
                ("--tables", "f16"),
            ],
        ),
    ];
    for (dtype, options) in builds {
        let blob = BlobSource::Convert {
            checkpoint: root().join(firmware::DEFAULT_CHECKPOINT),
            config: None,
            dtype: dtype.into(),
            options: options.iter().map(|&(f, v)| (f, v.into())).collect(),
        }
        .resolve(Some(&tool))?;
        firmware::run(matrix::firmware_args(Board::Mps2An386, &blob, &[]))
            .with_context(|| format!("the shipped model as {dtype} {options:?}"))?;
        // The grouped kernel's portable Rust (soft float, no DSP instructions) on RISC-V too.
        if dtype == "i8g" && options.len() == 1 {
            firmware::run(matrix::firmware_args(Board::Riscv32Virt, &blob, &[]))
                .context("the shipped model as i8g W8A16 on riscv32-virt")?;
        }
    }
    Ok(())
}

/// The shipped model as int4 and as f16 on the Cortex-M4F, then the `gpt2_like` fixture as int4 (its
/// 32-column matrices take the int4 kernel's one-group passes): the `asm!` kernels of those dtypes
/// (`quant/int4_rows.rs`, `math/rows.rs`) against the host's hash.
fn int4_f16_on_qemu() -> Result<()> {
    let tool = host_tool::build()?;
    let convert = |checkpoint: PathBuf, dtype: &str| {
        BlobSource::Convert {
            checkpoint,
            config: None,
            dtype: dtype.into(),
            options: Vec::new(),
        }
        .resolve(Some(&tool))
    };
    for dtype in ["i4", "f16"] {
        let blob = convert(root().join(firmware::DEFAULT_CHECKPOINT), dtype)?;
        firmware::run(matrix::firmware_args(Board::Mps2An386, &blob, &[]))
            .with_context(|| format!("the shipped model as {dtype}"))?;
    }
    let fixture = root().join("tests/fixtures/gpt2_like/model.safetensors");
    let blob = convert(fixture, "i4")?;
    firmware::run(matrix::firmware_args(
        Board::Mps2An386,
        &blob,
        &FIXTURE_ARGS,
    ))
    .context("fixture gpt2_like as i4")
    .map(|_| ())
}

/// The boards of the serve step: the Cortex-M4F (with the corrupted frames), the STM32F405 and the
/// Cortex-M0.
const SERVE_CHECKED: [Board; 3] = [Board::Mps2An386, Board::Netduinoplus2, Board::Microbit];

/// [`crate::served::check`] on each of [`SERVE_CHECKED`], all at once: the checks wait on the emulated
/// UARTs more than they compute, so they overlap (the firmware builds take turns).
fn serve_boards() -> Result<()> {
    host_tool::build()?;
    crate::defmt_print::ensure()?;
    on_lanes(&SERVE_CHECKED, SERVE_CHECKED.len(), "serve mode", |b| {
        crate::served::check(b)
    })
}

/// Boards [`every_board`] runs at once: a firmware build (one codegen unit) or a QEMU run keeps one core
/// busy, so two overlap on two cores.
const BOARD_LANES: usize = 2;

/// The names of [`Board::ALL`]'s emulated (or real) boards, comma-separated.
fn board_names(emulated: bool) -> String {
    let names: Vec<&str> = Board::ALL
        .iter()
        .filter(|b| b.emulated() == emulated)
        .map(|b| b.name())
        .collect();
    names.join(", ")
}

/// [`matrix::board`] on every board of [`Board::ALL`], [`BOARD_LANES`] at a time (the firmware builds
/// take turns; the QEMU runs overlap).
fn every_board() -> Result<()> {
    host_tool::build()?;
    on_lanes(&Board::ALL, BOARD_LANES, "firmware", |b| {
        matrix::board(b).map(|_| ())
    })
}

/// `check` on each of `boards`, `lanes` at a time, each board's result printed as it ends; fails naming
/// each board that failed (`what` failed on ...).
fn on_lanes(
    boards: &[Board],
    lanes: usize,
    what: &str,
    check: impl Fn(Board) -> Result<()> + Sync,
) -> Result<()> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..lanes {
            s.spawn(|| {
                while let Some(&b) = boards.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let started = Instant::now();
                    let result = check(b);
                    println!(
                        "{what} on {} ({}) {} in {:.0} s",
                        b.name(),
                        b.spec().core,
                        if result.is_ok() { "passed" } else { "FAILED" },
                        started.elapsed().as_secs_f64()
                    );
                    if let Err(e) = result {
                        let line = format!("{} ({}): {e:#}", b.name(), b.spec().core);
                        failed.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                    }
                }
            });
        }
    });
    let failed = failed.into_inner().unwrap_or_else(|e| e.into_inner());
    match failed.is_empty() {
        true => Ok(()),
        false => bail!("{what} failed on {}", failed.join("; ")),
    }
}

/// The fact prompt of [`edited_facts_on_qemu`] (`s1 s2 r`) and the object the edit writes for it (the
/// model recalls 44 before the edit).
const FACT_EDIT: (&str, &str) = ("2,21,33", "40");

/// The shipped fact model, ROME-edited by `microlens edit` to recall [`FACT_EDIT`]'s new object, on the
/// Cortex-M4F: the device recalls the edited fact, as the host does.
fn edited_facts_on_qemu() -> Result<()> {
    let tool = host_tool::build()?;
    let blob = BlobSource::Convert {
        checkpoint: root().join("firmware-example/model/facts-4l.safetensors"),
        config: None,
        dtype: "f32".into(),
        options: Vec::new(),
    }
    .resolve(Some(&tool))?;
    let edited = blob.with_file_name("facts-4l-edited.mlb");
    let (prompt, target) = FACT_EDIT;
    run_status(
        Command::new(&tool)
            .arg("edit")
            .arg(&blob)
            .args([
                "--prompt", prompt, "--target", target, "--dtypes", "i8", "-o",
            ])
            .arg(&edited),
    )?;
    let extra = [
        "--fact-prompt",
        prompt,
        "--expect-recall",
        target,
        "--stack-reserve",
        "4096",
    ];
    firmware::run(matrix::firmware_args(Board::Mps2An386, &edited, &extra)).map(|_| ())
}

/// Every step of `cargo xtask test`, in order.
fn steps() -> Vec<Step> {
    let mut steps = vec![
        Step {
            name: "rustfmt".into(),
            beside: false,
            run: cargo(&["fmt", "--all", "--", "--check"]),
        },
        Step {
            name: "workspace tests, linted by clippy as they build (the slowest two in their own step)".into(),
            // The default members: `research/` has no tests, and `browser-check/` (the browser step's
            // WebDriver client) would unify other features into shared dependencies (syn, smallvec)
            // and so make the host tool's build differ from the tests'.
            beside: false,
            run: Box::new(|| {
                run_status(
                    cargo_command()
                        .args(["test", "--"])
                        .args(crate::beside_firmware::skip_slow_tests()),
                )
            }),
        },
        Step {
            name: "clippy on the targets the other steps do not build (benches, research/)".into(),
            beside: true,
            run: Box::new(|| {
                run_status(cargo_command().args(["test", "--benches", "--no-run"]))?;
                host_tool::build_test_profile(&["microlens-research"])
            }),
        },
        Step {
            name: "the slowest tests (the fidelity regressions, one thread)".into(),
            beside: true,
            run: Box::new(crate::beside_firmware::slow_tests),
        },
        Step {
            name: "Python package (bindings/python): pytest against the fixtures and the command"
                .into(),
            beside: true,
            run: Box::new(crate::python::test),
        },
        Step {
            name: "the shipped induction model reproduces from its recipe".into(),
            beside: true,
            run: Box::new(crate::reproduce::shipped_model),
        },
        Step {
            name: "microlens report and --html pages in headless Chromium (WebDriver)".into(),
            beside: true,
            run: Box::new(|| crate::browser::run(crate::browser::Args { screenshot: None })),
        },
        Step {
            name: "core docs (every public item documented, no broken links)".into(),
            beside: true,
            run: Box::new(|| {
                run_status(
                    cargo_command()
                        .args([
                            "doc",
                            "-p",
                            "microlens",
                            "--no-deps",
                            "--features",
                            "std,encode",
                        ])
                        .env("RUSTDOCFLAGS", "-D warnings"),
                )
            }),
        },
        Step {
            name: "core without std".into(),
            beside: false,
            run: cargo(&["build", "-p", "microlens", "--no-default-features"]),
        },
        Step {
            name: "core and protocol trees have no std/alloc".into(),
            beside: false,
            run: Box::new(no_std_no_alloc),
        },
        Step {
            name: "host tool and tests share one build (same features)".into(),
            // The host tool ([`host_tool::build`]): CI and the demo compile candle and the host
            // crates once.
            beside: false,
            run: Box::new(|| shares_test_build("microlens-host", "the host tool")),
        },
        Step {
            name: "compile-time crates (proc macros, build scripts' libraries) built unoptimised".into(),
            beside: false,
            run: Box::new(crate::compile_time_crates::check),
        },
        Step {
            name: "Python extension and tests share one build (same features)".into(),
            beside: false,
            run: Box::new(|| shares_test_build("microlens-python", "the Python extension")),
        },
        Step {
            name: "core tests on 32-bit (i686), started in the background (a step after the firmware waits for them)".into(),
            beside: false,
            run: Box::new(crate::core32::run_in_background),
        },
        Step {
            name: THUMBV6M.into(),
            beside: true,
            run: Box::new(thumbv6m::check),
        },
        Step {
            name: "firmware on QEMU mps2-an386 and mps3-an547, norm, MLP, sinusoidal and LLaMA-shaped models (the LLaMA one on riscv32-virt too)"
                .into(),
            beside: false,
            run: Box::new(fixtures_on_qemu),
        },
        Step {
            name: "firmware on QEMU mps2-an386, the byte-level model (int8)".into(),
            beside: false,
            run: Box::new(|| {
                let args = ["firmware", "--skip-thumbv6m", "--model", "bytes"];
                firmware::run(matrix::parse_firmware_args(args)).map(|_| ())
            }),
        },
        Step {
            name: "firmware on QEMU mps2-an386, riscv32-virt and microbit, the LLaMA-family story model (int8, nearest rounding; int4 with its context capped on the micro:bit), a story continued, its induction heads ablated; on mps2-an385 (the M3) in the integer-only arithmetic"
                .into(),
            beside: false,
            run: Box::new(|| {
                // Nearest rounding on the M4F and RV32 (GPTQ of this model costs about 190 s of
                // CPU); the micro:bit's int4 by GPTQ.
                for board in [Board::Mps2An386, Board::Riscv32Virt, Board::Microbit] {
                    firmware::run(matrix::stories_args(board))?;
                }
                firmware::run(matrix::stories_args_in(Board::Mps2An385, true)).map(|_| ())
            }),
        },
        Step {
            name: "firmware on QEMU mps2-an386, int4 and f16 (and a norm and MLP model as int4)"
                .into(),
            beside: false,
            run: Box::new(int4_f16_on_qemu),
        },
        Step {
            name: "firmware on QEMU mps2-an386, W8A16 (--activations i16; i8 and i8g, the int16 KV cache; i8g on riscv32-virt)"
                .into(),
            beside: false,
            run: Box::new(w8a16_on_qemu),
        },
        Step {
            name: "firmware on QEMU mps2-an386, a ROME-edited fact model".into(),
            beside: false,
            run: Box::new(edited_facts_on_qemu),
        },
    ];
    steps.push(Step {
        name: "the firmware's default blob is the shipped model's current int8 conversion".into(),
        beside: false,
        run: Box::new(crate::cargo_run::default_blob_is_current),
    });
    steps.push(Step {
        name: "cargo run --release --features mps2-an386 in firmware-example (the runner, QEMU): logits hash equals the host's".into(),
        beside: false,
        run: Box::new(|| crate::cargo_run::check(Board::Mps2An386)),
    });
    steps.push(Step {
        name: "serve mode on QEMU mps2-an386, netduinoplus2 and microbit at once (int8 and f32): device run --hash, device cache and device fidelity equal the host's; 10,000 corrupted frames on the mps2-an386".into(),
        beside: false,
        run: Box::new(serve_boards),
    });
    steps.push(Step {
        name: format!(
            "firmware on every board, {BOARD_LANES} at a time: on QEMU where emulated ({}), int8 and f32, and the integer-only arithmetic (int8 and int4 matrices) on {}; the real boards built ({})",
            board_names(true),
            matrix::INTEGER_BOARDS.map(|b| b.name()).join(", "),
            board_names(false)
        ),
        beside: false,
        run: Box::new(every_board),
    });
    steps.push(Step {
        name: "the demo (cargo xtask demo, the README's first command) runs through".into(),
        beside: false,
        run: Box::new(crate::demo::run),
    });
    steps.push(Step {
        name: "the steps beside the firmware: their results".into(),
        beside: false,
        run: Box::new(crate::beside_firmware::wait),
    });
    steps.push(Step {
        name: "core tests on 32-bit (i686): their result".into(),
        beside: false,
        run: Box::new(crate::core32::wait),
    });
    steps.push(Step {
        name: "fuzz targets on their seed corpus and 200 mutants of each seed, uninstrumented (the campaigns: cargo xtask fuzz)".into(),
        beside: false,
        run: Box::new(crate::fuzz::replay),
    });
    // In a full run the steps marked `beside` run in a second process, started just before the
    // firmware steps (after them, this process builds nothing more in the workspace's target
    // directory but the Python extension, once, for the serve step).
    let beside: Vec<String> = steps
        .iter()
        .filter(|s| s.beside)
        .map(|s| s.name.clone())
        .collect();
    let at = steps
        .iter()
        .position(|s| s.name == THUMBV6M)
        .map_or(0, |i| i + 1);
    steps.insert(
        at,
        Step {
            name: START_BESIDE.into(),
            beside: false,
            run: Box::new(move || {
                host_tool::build()?;
                crate::python::prepare()?;
                crate::browser::prepare()?;
                thumbv6m::prepare()?;
                crate::beside_firmware::start(&beside)
            }),
        },
    );
    steps
}

/// The name of the step that starts the steps beside the firmware (never part of an `--only` run,
/// which runs them in place).
const START_BESIDE: &str = "the steps beside the firmware, started in a second process (the host tool built, the Python venv, Chromium and the thumbv6m toolchain installed first)";

/// The thumbv6m step's name.
const THUMBV6M: &str = "thumbv6m build";

/// User + system CPU seconds of this process's finished children (compilers, QEMU, tests), from
/// `/proc/self/stat` (Linux; 100 ticks a second): a step's cost whatever else the machine is doing.
fn children_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(13)? + ticks(14)?) / 100.0)
}

/// Arguments of `cargo xtask test`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only the steps whose names contain this text (case-insensitive), e.g. `serve`, all in this
    /// process; CI runs every step.
    #[arg(long)]
    pub only: Option<String>,
    /// Exactly the step of this name (repeatable): how the full run starts the steps beside the
    /// firmware in a second process.
    #[arg(long = "step", hide = true, conflicts_with = "only")]
    pub steps: Vec<String>,
}

/// Runs every step (or those `args.only` or `args.steps` names) and fails if any failed. The
/// workspace's crates are compiled by clippy ([`crate::lint`]).
pub fn run(args: Args) -> Result<()> {
    // A test run compiles each workspace crate once: incremental compilation's caches (and its many
    // codegen units) would cost about a fifth more CPU and never be reused (docs/build-time.md). Set
    // before any thread starts; every cargo this process and the second one run inherits it.
    std::env::set_var("CARGO_INCREMENTAL", "0");
    crate::lint::enable()?;
    let only = args.only.map(|s| s.to_lowercase());
    let all = steps();
    if let Some(unknown) = args
        .steps
        .iter()
        .find(|n| !all.iter().any(|s| &s.name == *n))
    {
        bail!("no step is named {unknown:?}");
    }
    let steps: Vec<Step> = all
        .into_iter()
        .filter(|s| match (&only, args.steps.is_empty()) {
            (Some(o), _) => s.name != START_BESIDE && s.name.to_lowercase().contains(o),
            (None, false) => args.steps.contains(&s.name),
            (None, true) => !s.beside,
        })
        .collect();
    if steps.is_empty() {
        bail!("no step's name contains {:?}", only.unwrap_or_default());
    }
    let (mut passed, mut failed) = (0, Vec::new());
    let (all, cpu_all) = (Instant::now(), children_cpu_seconds());
    for step in &steps {
        let started = Instant::now();
        let cpu_before = children_cpu_seconds();
        println!("\n=== xtask test: {} ===", step.name);
        match (step.run)() {
            Ok(()) => passed += 1,
            Err(e) => {
                eprintln!("xtask test: {} FAILED: {e:#}", step.name);
                failed.push(step.name.as_str());
            }
        }
        let cpu = match (cpu_before, children_cpu_seconds()) {
            (Some(a), Some(b)) => format!(", CPU {:.0} s", b - a),
            _ => String::new(),
        };
        println!(
            "=== {} done in {:.0} s{cpu} ===",
            step.name,
            started.elapsed().as_secs_f64()
        );
    }
    println!();
    if !failed.is_empty() {
        println!("failed steps: {}", failed.join(", "));
    }
    println!(
        "steps: {passed} passed, {} failed, in {:.0} s (CPU {:.0} s)",
        failed.len(),
        all.elapsed().as_secs_f64(),
        children_cpu_seconds().unwrap_or(0.0) - cpu_all.unwrap_or(0.0)
    );
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("{} step(s) failed", failed.len())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn std_and_alloc_features_are_found() {
        let tree = "microlens v0.1.0 (/x) [default,std]\nbytemuck v1 []\npostcard v1.1.3 [alloc]\nserde v1 [derive,std] (*)\nstdx v1 [stdish]";
        assert_eq!(super::std_or_alloc(tree).len(), 3);
    }

    #[test]
    fn features_the_tests_lack_are_found() {
        let tool = "a v1 [std]\nb v1 []\nc v1 [x] (*)\nb v1 []";
        let tests = "a v1 [std]\nb v1 [std]\nc v1 [x]\nd v1 []";
        assert_eq!(super::unshared(tool, tests), ["b v1 []"]);
    }
}
