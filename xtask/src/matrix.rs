//! Every board with the shipped model: the emulated ones run as int8 and as f32 and checked against
//! the host, the real ones built as int8 and measured. `cargo xtask boards` prints the table that
//! docs/firmware-boards.md quotes; `cargo xtask test` runs one step per board.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Result};
use clap::Parser;

use crate::blob_source::BlobSource;
use crate::boards::Board;
use crate::firmware::{self, Outcome};
use crate::host_tool;
use crate::paths::root;

/// The shipped model's storage types every emulated board runs: int8 (W8A8) and f32.
pub const DTYPES: [&str; 2] = ["i8", "f32"];

/// The build of the integer-only arithmetic (`--dtype i8 --arith integer`), which the cores without an
/// FPU and the M4F run too ([`INTEGER_BOARDS`]).
pub const INTEGER: &str = "i8 integer";

/// The integer-only arithmetic over int4 matrices (`--dtype i4 --arith integer`), on the same boards.
pub const INTEGER_I4: &str = "i4 integer";

/// The boards that also run the shipped model in the integer-only arithmetic: the Cortex-M0, the
/// Cortex-M3, the RV32IMAC and the M4F.
pub const INTEGER_BOARDS: [Board; 4] = [
    Board::Microbit,
    Board::Mps2An385,
    Board::Riscv32Virt,
    Board::Mps2An386,
];

/// Wraps the firmware arguments so their defaults can be parsed.
#[derive(Parser)]
struct FirmwareDefaults {
    #[command(flatten)]
    args: firmware::Args,
}

/// The arguments of `cargo xtask firmware --skip-thumbv6m --board B --blob PATH` and `extra`, the rest
/// at their defaults.
pub fn firmware_args(board: Board, blob: &Path, extra: &[&str]) -> firmware::Args {
    let blob = blob.to_string_lossy();
    let base = [
        "firmware",
        "--skip-thumbv6m",
        "--board",
        board.name(),
        "--blob",
        &blob,
    ];
    parse_firmware_args(base.iter().chain(extra).copied())
}

/// `args` (from `"firmware"` on) parsed as `cargo xtask firmware`'s arguments, the rest at their defaults.
pub fn parse_firmware_args<'a>(args: impl IntoIterator<Item = &'a str>) -> firmware::Args {
    FirmwareDefaults::parse_from(args).args
}

/// The shipped model converted to `dtype` (or [`INTEGER`]), once per run (a conversion takes half a
/// minute; every board embeds the same blob).
pub fn shipped_blob(dtype: &str) -> Result<PathBuf> {
    static BLOBS: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut blobs = BLOBS.lock().unwrap_or_else(|e| e.into_inner());
    let blobs = blobs.get_or_insert_with(HashMap::new);
    if let Some(blob) = blobs.get(dtype) {
        return Ok(blob.clone());
    }
    let tool = host_tool::build()?;
    let (stored, options) = match dtype {
        INTEGER => ("i8", vec![("--arith", "integer".to_string())]),
        INTEGER_I4 => ("i4", vec![("--arith", "integer".to_string())]),
        _ => (dtype, Vec::new()),
    };
    let blob = BlobSource::Convert {
        checkpoint: root().join(firmware::DEFAULT_CHECKPOINT),
        config: None,
        dtype: stored.into(),
        options,
    }
    .resolve(Some(&tool))?;
    blobs.insert(dtype.into(), blob.clone());
    Ok(blob)
}

/// `cargo xtask firmware --board B` with the shipped model in each of [`DTYPES`] (an emulated board,
/// run and checked; on [`INTEGER_BOARDS`] also [`INTEGER`] and [`INTEGER_I4`]) or as int8 (a real
/// board, built and measured). Runs every build; fails if any failed, else returns what each measured.
pub fn board(board: Board) -> Result<Vec<(&'static str, Outcome)>> {
    let mut dtypes: Vec<&'static str> = match board.emulated() {
        true => DTYPES.to_vec(),
        false => DTYPES[..1].to_vec(),
    };
    if board.emulated() && INTEGER_BOARDS.contains(&board) {
        dtypes.extend([INTEGER, INTEGER_I4]);
    }
    let (mut outcomes, mut failed) = (Vec::new(), Vec::new());
    for dtype in dtypes {
        let run =
            shipped_blob(dtype).and_then(|blob| firmware::run(firmware_args(board, &blob, &[])));
        match run {
            Ok(outcome) => outcomes.push((dtype, outcome)),
            Err(e) => {
                eprintln!("xtask: {} {dtype}: {e:#}", board.name());
                failed.push(dtype);
            }
        }
    }
    if !failed.is_empty() {
        bail!("{} failed for {}", board.name(), failed.join(", "));
    }
    Ok(outcomes)
}

/// The story model's storage type on `board`: int8, or int4 on the micro:bit (int8 does not fit its
/// 256 KiB of flash).
pub fn stories_dtype(board: Board) -> &'static str {
    match board {
        Board::Microbit => "i4",
        _ => "i8",
    }
}

/// `cargo xtask firmware --board B --model stories` as `cargo xtask test` and `cargo xtask boards
/// --model stories` run it: int8 with nearest rounding and the story checks
/// ([`crate::models::STORIES_CHECKS`]); on the micro:bit int4 by GPTQ (nearest int4 garbles the
/// text), its context capped at 11 by its 16 KiB of RAM: a 4-token opening twice, too short for the
/// accuracy and ablation checks.
pub fn stories_args(board: Board) -> firmware::Args {
    stories_args_in(board, false)
}

/// The boards that also run the story model in the integer-only arithmetic: [`INTEGER_BOARDS`] but
/// the micro:bit, whose flash takes the model as int4 only, and int4 in the integer arithmetic (245 KB
/// with its plan) not beside the firmware's code.
pub fn stories_integer_boards() -> impl Iterator<Item = Board> {
    INTEGER_BOARDS.into_iter().filter(|&b| b != Board::Microbit)
}

/// [`stories_args`], in the integer-only arithmetic when `integer` (int8 matrices, nearest rounding,
/// [`crate::models::STORIES_INTEGER_CHECKS`]).
pub fn stories_args_in(board: Board, integer: bool) -> firmware::Args {
    let base = [
        "firmware",
        "--skip-thumbv6m",
        "--board",
        board.name(),
        "--model",
        "stories",
    ];
    let mut args = base.to_vec();
    match board {
        Board::Microbit => args.extend(["--dtype", "i4", "--text-prompt", "Once"]),
        _ => args.extend(["--rounding", "nearest"]),
    }
    if integer {
        args.extend(["--arith", "integer"]);
    }
    match (board, integer) {
        (Board::Microbit, _) => args.extend(["--min-accuracy", "0", "--min-ablation-drop=-1"]),
        (_, false) => args.extend(crate::models::STORIES_CHECKS),
        (_, true) => args.extend(crate::models::STORIES_INTEGER_CHECKS),
    }
    parse_firmware_args(args)
}

/// The story model on `board` ([`stories_args`]), and on [`stories_integer_boards`] also in the
/// integer-only arithmetic.
fn stories_board(board: Board) -> Result<Vec<(&'static str, Outcome)>> {
    let mut out = vec![(stories_dtype(board), firmware::run(stories_args(board))?)];
    if stories_integer_boards().any(|b| b == board) {
        out.push((INTEGER, firmware::run(stories_args_in(board, true))?));
    }
    Ok(out)
}

/// `cargo xtask boards [--model stories]`: every board with the shipped token model ([`board`]) or
/// the story model ([`stories_args`]; on [`stories_integer_boards`] also in the integer-only
/// arithmetic), then the table.
pub fn table(stories: bool) -> Result<()> {
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for b in Board::ALL {
        let run = match stories {
            true => stories_board(b),
            false => board(b),
        };
        match run {
            Ok(outcomes) => rows.extend(outcomes.into_iter().map(|(d, o)| (b, d, o))),
            Err(e) => failed.push(format!("{e:#}")),
        }
    }
    println!("\n| board | core | dtype | flash (B) | RAM (B) | context | instructions/token | MACs/token | instructions/MAC |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    for (b, dtype, o) in rows {
        let per_mac = match (o.instructions_per_token, o.macs_per_token) {
            (Some(i), Some(m)) if m > 0 => format!("{:.2}", i as f64 / m as f64),
            _ => "(built only)".into(),
        };
        let show = |v: Option<u64>| v.map_or("".into(), |v| v.to_string());
        println!(
            "| `{}` | {} | {dtype} | {} | {} | {} | {} | {} | {per_mac} |",
            b.name(),
            b.spec().core,
            o.flash,
            o.ram,
            o.context,
            show(o.instructions_per_token),
            show(o.macs_per_token),
        );
    }
    if !failed.is_empty() {
        bail!("{}", failed.join("; "));
    }
    Ok(())
}
