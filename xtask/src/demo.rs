//! `cargo xtask demo`: the whole story on a fresh machine. The shipped induction model is converted to
//! f32 and int8 blobs, its circuits are shown (which heads are previous-token and induction heads), the
//! int8-vs-float fidelity table, and finally the firmware running the int8 blob on QEMU.

use std::path::Path;
use std::process::Command;

use anyhow::Result;
use clap::Parser;

use crate::firmware;
use crate::paths::{root, workspace_target_dir};
use crate::toolchain::run_status;

/// Wraps the firmware arguments so their defaults can be parsed.
#[derive(Parser)]
struct FirmwareDefaults {
    #[command(flatten)]
    args: firmware::Args,
}

fn section(title: &str) {
    println!("\n=== {title} ===");
}

fn microlens(tool: &Path, args: &[&str]) -> Result<()> {
    run_status(Command::new(tool).current_dir(root()).args(args))
}

/// Runs the demo.
pub fn run() -> Result<()> {
    let tool = crate::host_tool::build()?;
    let out = workspace_target_dir().join("demo");
    std::fs::create_dir_all(&out)?;
    let ckpt = root().join("firmware-example/model/induction-2l.safetensors");
    let (ckpt, f32_blob, i8_blob) = (
        ckpt.to_string_lossy(),
        out.join("induction-2l-f32.mlb"),
        out.join("induction-2l-i8.mlb"),
    );
    let (f32_blob, i8_blob) = (f32_blob.to_string_lossy(), i8_blob.to_string_lossy());

    section("1. the shipped induction model, converted to f32 and int8 blobs");
    microlens(&tool, &["convert", &ckpt, "-o", &f32_blob])?;
    microlens(&tool, &["convert", &ckpt, "-o", &i8_blob, "--dtype", "i8"])?;
    microlens(&tool, &["inspect", &i8_blob])?;

    section("2. its circuits: previous-token and induction heads, composition, ablation");
    microlens(&tool, &["circuits", &f32_blob])?;

    section("3. int8 against float, per head");
    microlens(&tool, &["fidelity", &f32_blob, &i8_blob])?;

    section("4. the int8 blob on a Cortex-M4F (QEMU mps2-an386), checked against the host");
    firmware::run(FirmwareDefaults::parse_from(["firmware", "--blob", &i8_blob]).args).map(|_| ())
}
