//! `cargo xtask demo`: the whole story on a fresh machine. The shipped induction model is converted to
//! f32 and int8 blobs, its circuits are shown (which heads are previous-token and induction heads), the
//! int8-vs-float fidelity table, and the firmware running the int8 blob on QEMU; then the byte-level
//! model's held-out tests, and the same English phrase continued on the host and on QEMU (device =
//! host); then the LLaMA-family story model continuing a story on the host and on QEMU.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use crate::paths::{root, workspace_target_dir};
use crate::toolchain::run_status;
use crate::{firmware, matrix, models};

fn section(title: &str) {
    println!("\n=== {title} ===");
}

fn microlens(tool: &Path, args: &[&str]) -> Result<()> {
    run_status(Command::new(tool).current_dir(root()).args(args))
}

/// The prompt the byte-level model continues on the host: the firmware's (`PHRASE` in
/// `firmware-example/src/prompt.rs`), twice.
const PHRASE_TWICE: &str = "tiny models read text. tiny models read text. ";

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
    // The thumbv6m core check is CI's (`cargo xtask test`), not a first run's.
    firmware::run(matrix::parse_firmware_args([
        "firmware",
        "--skip-thumbv6m",
        "--blob",
        &i8_blob,
    ]))?;

    let bytes = root().join(models::by_name("bytes")?.checkpoint);
    let bytes_blob = out.join("induction-bytes-i8.mlb");
    let (bytes, bytes_blob) = (bytes.to_string_lossy(), bytes_blob.to_string_lossy());
    section("5. the byte-level model (vocabulary 256) as int8: held-out tests, a phrase continued");
    microlens(
        &tool,
        &["convert", &bytes, "-o", &bytes_blob, "--dtype", "i8"],
    )?;
    microlens(&tool, &["eval-induction", &bytes_blob])?;
    println!("microlens generate --text {PHRASE_TWICE:?} --max-new-tokens 16:");
    microlens(
        &tool,
        &[
            "generate",
            &bytes_blob,
            "--text",
            PHRASE_TWICE,
            "--max-new-tokens",
            "16",
        ],
    )?;

    section("6. the byte-level model on QEMU: the same phrase continued, checked against the host");
    let args = ["firmware", "--skip-thumbv6m", "--model", "bytes"];
    firmware::run(matrix::parse_firmware_args(args))?;

    let stories = root().join(models::by_name("stories")?.checkpoint);
    // Its llama2.c-style tokenizer, beside the checkpoint (the blob records which one it is).
    let tokenizer = stories.with_file_name("tokenizer.bin");
    let stories_blob = out.join("stories-260k-i8.mlb");
    let (stories, stories_blob) = (stories.to_string_lossy(), stories_blob.to_string_lossy());
    let tokenizer = tokenizer.to_string_lossy();
    section("7. the LLaMA-family story model (llama2.c's stories260K shape) as int8, continuing a story");
    microlens(
        &tool,
        &["convert", &stories, "-o", &stories_blob, "--dtype", "i8"],
    )?;
    println!("microlens generate --text {STORY:?} --tokenizer {tokenizer} --max-new-tokens 40:");
    microlens(
        &tool,
        &[
            "generate",
            &stories_blob,
            "--tokenizer",
            &tokenizer,
            "--text",
            STORY,
            "--max-new-tokens",
            "40",
        ],
    )?;
    section("8. the story model on QEMU: its prompt continued, checked against the host");
    let args = ["firmware", "--skip-thumbv6m", "--model", "stories"];
    let args = args.into_iter().chain(models::STORIES_CHECKS);
    firmware::run(matrix::parse_firmware_args(args)).map(|_| ())
}

/// The story opening the story model continues on the host.
const STORY: &str = "One day, Tom went to the park. Tom had a red kite. ";
