//! `cargo xtask bench-device-peers`: microlens on QEMU beside the peers on the microcontrollers, in one
//! run, all counted by QEMU `-icount shift=0`:
//!
//! - CMSIS-NN's `arm_fully_connected_s8` and `arm_softmax_s8` (the reference harness `cmsis-nn-bench`,
//!   gcc `-O3`) on the Cortex-M4F with the DSP extension, and its plain C path for the Cortex-M3 and
//!   Cortex-M0, beside the shipped induction model's int8 instructions per MAC on `mps2-an386`,
//!   `mps2-an385`, `microbit` and `riscv32-virt`;
//! - llama2.c's `forward()` (`run.c` f32 and `runq.c` `Q8_0`, the reference harness `llama2c-bench`) on
//!   the Cortex-M4F with a random stories260K-shaped model, beside the same model converted by
//!   `microlens convert` to f32 and int8 and run by the firmware on `mps2-an386`.
//!
//! The peers' sources are not part of the repository: `--cmsis-nn DIR` / `--llama2c DIR` (checkouts at
//! the pinned commits), or cloned at those commits. The harnesses (`--harnesses DIR`, holding
//! `cmsis-nn-bench/` and `llama2c-bench/`) are copied to `target/device-peers/` and built there with
//! Debian's `gcc-arm-none-eabi` and newlib (installed with apt-get when missing); llama2.c's `run.c` and
//! `runq.c` are patched there with the harness's diffs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::blob_source::BlobSource;
use crate::boards::Board;
use crate::firmware::{self, Outcome};
use crate::paths::{on_path, root, workspace_target_dir};
use crate::toolchain::{ensure_packages, run_status, Package, QEMU_ARM};
use crate::{host_tool, matrix};

/// CMSIS-NN's commit the figures are measured at.
const CMSIS_NN_COMMIT: &str = "99f736a63036613032f9b70de36b493bcd7802d4";
/// llama2.c's commit the figures are measured at.
const LLAMA2C_COMMIT: &str = "350e04fe35433e6d2941dce5a1f53308f87058eb";

/// The Arm bare-metal C compiler.
const GCC_ARM: Package = Package {
    name: "gcc-arm-none-eabi",
    present: || on_path("arm-none-eabi-gcc"),
};
/// Its C library (newlib, newlib-nano).
const NEWLIB_ARM: Package = Package {
    name: "libnewlib-arm-none-eabi",
    present: || Path::new("/usr/lib/arm-none-eabi/newlib/libc_nano.a").is_file(),
};

/// The boards the shipped model's int8 instructions per MAC are measured on.
const BOARDS: [Board; 4] = [
    Board::Mps2An386,
    Board::Mps2An385,
    Board::Microbit,
    Board::Riscv32Virt,
];

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// CMSIS-NN's source at the pinned commit [default: cloned into target/device-peers/].
    #[arg(long)]
    pub cmsis_nn: Option<PathBuf>,
    /// llama2.c's source at the pinned commit [default: cloned into target/device-peers/].
    #[arg(long)]
    pub llama2c: Option<PathBuf>,
    /// The directory holding the reference harnesses `cmsis-nn-bench/` and `llama2c-bench/`.
    #[arg(long, default_value = "../shared/reference")]
    pub harnesses: PathBuf,
}

/// One CMSIS-NN build: its name, compiler flags, `ARM_MATH_DSP` and the QEMU machine and CPU.
struct NnBuild {
    core: &'static str,
    arch: &'static str,
    dsp: &'static str,
    tag: &'static str,
    machine: &'static str,
    cpu: &'static str,
}

const NN_BUILDS: [NnBuild; 3] = [
    NnBuild {
        core: "Cortex-M4F, DSP",
        arch: "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16",
        dsp: "-DARM_MATH_DSP",
        tag: "",
        machine: "mps2-an386",
        cpu: "cortex-m4",
    },
    NnBuild {
        core: "Cortex-M3, no DSP",
        arch: "-mcpu=cortex-m3 -mthumb -mfloat-abi=soft",
        dsp: "",
        tag: "-m3",
        machine: "mps2-an385",
        cpu: "cortex-m3",
    },
    // QEMU has no Cortex-M0 on an mps2 machine; ARMv6-M code runs on the M3 with the M0's counts.
    NnBuild {
        core: "Cortex-M0, no DSP",
        arch: "-mcpu=cortex-m0 -mthumb -mfloat-abi=soft",
        dsp: "",
        tag: "-m0",
        machine: "mps2-an385",
        cpu: "cortex-m3",
    },
];

/// What one CMSIS-NN build measured: instructions per MAC of `arm_fully_connected_s8` at 64 -> 64,
/// 64 -> 256 and 256 -> 64, and `arm_softmax_s8`'s instructions per element (1 x 64).
struct NnFigures {
    fc: [f64; 3],
    softmax: f64,
}

/// What a llama2.c harness measured: mean instructions per token over positions 0-63 and per MAC.
struct LlamaFigures {
    per_token: u64,
    per_mac: f64,
}

/// Runs the comparison and prints its tables.
pub fn run(args: Args) -> Result<()> {
    ensure_packages(&[GCC_ARM, NEWLIB_ARM, QEMU_ARM])?;
    let harnesses = root().join(&args.harnesses);
    let work = workspace_target_dir().join("device-peers");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let nn_src = source(
        args.cmsis_nn,
        &work,
        "https://github.com/ARM-software/CMSIS-NN",
        CMSIS_NN_COMMIT,
    )?;
    let llama_src = source(
        args.llama2c,
        &work,
        "https://github.com/karpathy/llama2.c",
        LLAMA2C_COMMIT,
    )?;

    // The peers.
    let nn_dir = copy_harness(
        &harnesses.join("cmsis-nn-bench"),
        &work.join("cmsis-nn-bench"),
    )?;
    let mut nn = Vec::new();
    for build in &NN_BUILDS {
        nn.push(cmsis_nn(&nn_dir, &nn_src, build)?);
    }
    let llama_dir = copy_harness(
        &harnesses.join("llama2c-bench"),
        &work.join("llama2c-bench"),
    )?;
    let model = llama_model(&llama_dir, &llama_src)?;
    let run_c = llama2c(&llama_dir, "run")?;
    let runq_c = llama2c(&llama_dir, "runq")?;

    // microlens, in the same run.
    // The shipped model as int8 in the float arithmetic and in the integer-only one, per board.
    let mut ours = Vec::new();
    for board in BOARDS {
        let [float, integer] = ["i8", matrix::INTEGER].map(|dtype| {
            let blob = matrix::shipped_blob(dtype)?;
            firmware::run(matrix::firmware_args(board, &blob, &[]))
        });
        ours.push((float?, integer?));
    }
    let tool = host_tool::build()?;
    let mut llama_ours = Vec::new();
    for dtype in ["f32", "i8"] {
        let blob = BlobSource::Convert {
            checkpoint: model.clone(),
            config: None,
            dtype: dtype.into(),
            options: Vec::new(),
        }
        .resolve(Some(&tool))?;
        // A random model: no induction to check; its stack is deeper than the shipped model's.
        let extra = [
            "--min-accuracy",
            "0",
            "--min-ablation-drop",
            "0",
            "--stack-reserve",
            "12288",
        ];
        llama_ours.push((
            dtype,
            firmware::run(matrix::firmware_args(Board::Mps2An386, &blob, &extra))?,
        ));
    }

    print_tables(&nn, &ours, &run_c, &runq_c, &llama_ours);
    Ok(())
}

/// A peer's source: the given directory, or a clone at `commit` under `work`.
fn source(given: Option<PathBuf>, work: &Path, url: &str, commit: &str) -> Result<PathBuf> {
    if let Some(dir) = given {
        return dir
            .canonicalize()
            .with_context(|| format!("source {}", dir.display()));
    }
    let name = url.rsplit('/').next().unwrap_or("source");
    let dir = work.join(format!("{name}-{}", &commit[..12]));
    if !dir.join(".git").is_dir() {
        run_status(Command::new("git").arg("clone").arg(url).arg(&dir))?;
    }
    run_status(
        Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args(["checkout", "--quiet", commit]),
    )?;
    Ok(dir)
}

/// The harness `from` copied to `to` (replacing an earlier copy).
fn copy_harness(from: &Path, to: &Path) -> Result<PathBuf> {
    if !from.is_dir() {
        bail!(
            "no reference harness at {} (give --harnesses DIR)",
            from.display()
        );
    }
    if to.exists() {
        std::fs::remove_dir_all(to).with_context(|| format!("cannot remove {}", to.display()))?;
    }
    run_status(Command::new("cp").arg("-r").arg(from).arg(to))?;
    Ok(to.to_path_buf())
}

/// A command's standard output and error, failing unless it succeeds.
fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("{cmd:?} failed ({}):\n{text}", out.status);
    }
    Ok(text)
}

/// Builds and runs one CMSIS-NN build.
fn cmsis_nn(dir: &Path, src: &Path, build: &NnBuild) -> Result<NnFigures> {
    eprintln!("xtask: CMSIS-NN, {}", build.core);
    output(
        Command::new("sh")
            .current_dir(dir)
            .args(["./build.sh", "-O3"])
            .env("NN", src)
            .env("ARCH", build.arch)
            .env("DSP", build.dsp)
            .env("TAG", build.tag),
    )?;
    let text = output(
        Command::new("sh")
            .current_dir(dir)
            .arg("./run.sh")
            .arg(format!("bench-O3{}.elf", build.tag))
            .env("MACHINE", build.machine)
            .env("CPU", build.cpu),
    )?;
    if !text.contains("RESULT: all outputs match") {
        bail!(
            "CMSIS-NN {}: outputs differ from the scalar reference:\n{text}",
            build.core
        );
    }
    let fc = |shape: &str| -> Result<f64> {
        let line = line_starting(&text, &format!("fully_connected_s8 {shape} "))?;
        number(line, "net/MAC")
    };
    Ok(NnFigures {
        fc: [
            fc("in=64 out=64")?,
            fc("in=64 out=256")?,
            fc("in=256 out=64")?,
        ],
        softmax: number(
            line_starting(&text, "softmax_s8[random input] rows=1 len=64 ")?,
            "net/element",
        )?,
    })
}

/// The random stories260K-shaped llama2.c model (legacy `.bin`) and its `Q8_0` export (group size 4,
/// which divides the hidden 172), with llama2.c's `run.c` and `runq.c` patched for the board. Its
/// context is 64 positions (stories260K's is 512; a token's work does not depend on it), so that the
/// firmware's prompt is the 64 positions llama2.c's harness times.
fn llama_model(dir: &Path, src: &Path) -> Result<PathBuf> {
    let model = dir.join("stories260k-random.bin");
    output(
        Command::new("python3")
            .current_dir(dir)
            .arg("gen_model.py")
            .arg(&model)
            .args(["64", "172", "5", "8", "4", "512", "64"]),
    )?;
    output(
        Command::new("python3")
            .current_dir(dir)
            .arg("gen_modelq.py")
            .arg(&model)
            .args(["modelq.bin", "4"]),
    )?;
    std::fs::copy(&model, dir.join("model.bin")).context("model.bin")?;
    // run.c through forward() (362 lines), runq.c through forward() (481), then the harness's diff.
    for (name, lines) in [("run", 362), ("runq", 481)] {
        let original = std::fs::read_to_string(src.join(format!("{name}.c")))
            .with_context(|| format!("{}/{name}.c", src.display()))?;
        let head: String = original
            .split_inclusive('\n')
            .take(lines)
            .collect::<String>();
        let patched = dir.join(format!("{name}_mcu.c"));
        std::fs::write(&patched, head).with_context(|| format!("{}", patched.display()))?;
        run_status(Command::new("patch").current_dir(dir).args([
            "--quiet",
            &format!("{name}_mcu.c"),
            &format!("{name}_mcu.diff"),
        ]))?;
    }
    Ok(model)
}

/// Builds and runs llama2.c's `run.c` (`which` = `run`) or `runq.c` (`runq`) with gcc `-O3`.
fn llama2c(dir: &Path, which: &str) -> Result<LlamaFigures> {
    eprintln!("xtask: llama2.c {which}.c");
    output(
        Command::new("sh")
            .current_dir(dir)
            .args(["./build.sh", "-O3", which]),
    )?;
    let elf = match which {
        "run" => "llama-O3.elf",
        _ => "llamaq-O3.elf",
    };
    let text = output(Command::new("sh").current_dir(dir).args(["./run.sh", elf]))?;
    let line = line_starting(&text, "SUMMARY avg instructions/token")?;
    Ok(LlamaFigures {
        per_token: number(line, "instructions/token(pos0..63)")? as u64,
        per_mac: number(line, "MAC")?,
    })
}

/// The first line of `text` starting with `prefix`.
fn line_starting<'t>(text: &'t str, prefix: &str) -> Result<&'t str> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .with_context(|| format!("no line {prefix:?} in the harness's output:\n{text}"))
}

/// The number after `key=` in `line`.
fn number(line: &str, key: &str) -> Result<f64> {
    let at = line
        .find(&format!("{key}="))
        .with_context(|| format!("no {key}= in {line:?}"))?;
    let rest = &line[at + key.len() + 1..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end]
        .parse()
        .with_context(|| format!("{key}= in {line:?}"))
}

/// Instructions per MAC of a firmware run.
fn per_mac(o: &Outcome) -> f64 {
    match (o.instructions_per_token, o.macs_per_token) {
        (Some(i), Some(m)) if m > 0 => i as f64 / m as f64,
        _ => f64::NAN,
    }
}

/// The markdown tables.
fn print_tables(
    nn: &[NnFigures],
    ours: &[(Outcome, Outcome)],
    run_c: &LlamaFigures,
    runq_c: &LlamaFigures,
    llama_ours: &[(&str, Outcome)],
) {
    println!("\n## The shipped induction model (int8, whole token; float and integer-only arithmetic) beside CMSIS-NN (one layer alone, gcc -O3)\n");
    println!("| board | core | microlens instructions/MAC, float arithmetic | integer-only arithmetic | CMSIS-NN build | FC s8 64->64 /MAC | 64->256 | 256->64 | softmax s8 per element |");
    println!("|---|---|---:|---:|---|---:|---:|---:|---:|");
    let peer = [Some(0), Some(1), Some(2), None];
    for ((board, (float, integer)), p) in BOARDS.iter().zip(ours).zip(peer) {
        let theirs = match p.map(|i| (&NN_BUILDS[i], &nn[i])) {
            Some((b, f)) => format!(
                "{} | {:.2} | {:.2} | {:.2} | {:.0}",
                b.core, f.fc[0], f.fc[1], f.fc[2], f.softmax
            ),
            None => "(no RISC-V build) | | | |".into(),
        };
        println!(
            "| `{}` | {} | {:.2} | {:.2} | {theirs} |",
            board.name(),
            board.spec().core,
            per_mac(float),
            per_mac(integer)
        );
    }
    println!("\n## The stories260K-shaped model on the Cortex-M4F (mps2-an386)\n");
    println!("| build | instructions/token | per MAC | runq.c / this | run.c / this |");
    println!("|---|---:|---:|---:|---:|");
    let ratio = |peer: u64, ours: u64| peer as f64 / ours as f64;
    for (name, f) in [
        ("llama2.c run.c f32, gcc -O3", run_c),
        ("llama2.c runq.c Q8_0 (GS 4), gcc -O3", runq_c),
    ] {
        println!(
            "| {name} | {} | {:.2} | {:.2} | {:.2} |",
            f.per_token,
            f.per_mac,
            ratio(runq_c.per_token, f.per_token),
            ratio(run_c.per_token, f.per_token)
        );
    }
    for (dtype, o) in llama_ours {
        let i = o.instructions_per_token.unwrap_or(0).max(1);
        println!(
            "| microlens {dtype} | {i} | {:.2} | {:.2} | {:.2} |",
            per_mac(o),
            ratio(runq_c.per_token, i),
            ratio(run_c.per_token, i)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_after_their_keys() {
        let line = "fully_connected_s8 in=64 out=64 raw/call=10965.20 net=10950.20 MACs=4096 net/MAC=2.673 raw/MAC=2.677";
        assert_eq!(number(line, "net/MAC").unwrap(), 2.673);
        assert_eq!(number(line, "MACs").unwrap(), 4096.0);
        let summary = "SUMMARY avg instructions/token(pos0..63)=1710369 per MAC=6.105 | pos63";
        assert_eq!(
            number(summary, "instructions/token(pos0..63)").unwrap(),
            1710369.0
        );
        assert_eq!(number(summary, "MAC").unwrap(), 6.105);
        assert!(number(line, "absent").is_err());
    }
}
