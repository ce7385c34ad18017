//! Build script: picks the board's `memory.x`, checks the model blob named by `MICROLENS_BLOB` and sizes
//! the firmware's static buffers exactly from its header, for the longest context the board's RAM holds
//! (the model's `n_ctx`, or less on a small board such as the micro:bit).
//!
//! Environment:
//! - `MICROLENS_BLOB` (optional): path of the blob to embed (`cargo xtask firmware` sets it); relative
//!   paths are taken from this crate's directory. Unset: [`DEFAULT_BLOB`], the shipped int8 model.
//! - `MICROLENS_SEED` (optional): seed of the prompt generator, decimal or `0x` hex.
//! - `MICROLENS_STACK_RESERVE` (optional): the stack reserve in bytes, instead of the board's
//!   `_stack_reserve` (plus [`FULL_STACK_EXTRA`] with the `full` feature): for models other than the
//!   shipped one, whose stacks are deeper, and for the shipped model's integer builds on mps2-an386,
//!   whose stacks are shallower (`cargo xtask firmware` sets it).
//! - `MICROLENS_FACT_PROMPT` (optional): a fact model's prompt, comma-separated token ids.
//! - `MICROLENS_TEXT_PROMPT` (optional): a text prompt's token ids, comma-separated (encoded on the host
//!   by the model's tokenizer: `cargo xtask firmware --text-prompt TEXT` or `--model stories`); the
//!   prompt is then these tokens twice, and the firmware continues it.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// Boards, as cargo features; each has `memory/<name>.x` and `src/board/<name>.rs`.
const BOARDS: [&str; 12] = [
    "microbit",
    "mps2-an385",
    "mps2-an386",
    "mps2-an500",
    "mps2-an505",
    "mps3-an547",
    "netduinoplus2",
    "riscv32-virt",
    "nrf52840",
    "rp2040",
    "rp2350",
    "stm32f446re",
];

/// RAM the firmware's statics take beside the KV cache and the workspace (the session, defmt's and the
/// counter's state), an upper bound: the context cap leaves this much of the board's RAM free.
const OTHER_STATICS: usize = 512;

/// RAM serve mode's statics add (feature `serve`) beside 4 bytes per position for the consumed tokens:
/// the frame reader and writer, the ablated heads, an upper bound.
const SERVE_STATICS: usize = 512 + 1024 + 512;

/// Stack the `full` build (every capability, as plain `cargo build`/`cargo run` makes it) needs beyond
/// the board's `_stack_reserve`, which is sized for a build with only its blob's capabilities (`cargo
/// xtask firmware`'s): its dispatch over every storage type keeps more on the stack (the shipped int8
/// model: 2,144 B on the Cortex-M4F, against 1,840 B reserved).
const FULL_STACK_EXTRA: usize = 1024;

/// Vocabulary of a byte-level model (token `b` is the byte `b`).
const BYTE_VOCAB: usize = 256;

/// The blob embedded when `MICROLENS_BLOB` is not set: the shipped induction model, int8
/// (`microlens convert model/induction-2l.safetensors --dtype i8`; `cargo xtask test` checks it is current).
const DEFAULT_BLOB: &str = "model/induction-2l-i8.mlb";

/// Seed of the prompt generator when `MICROLENS_SEED` is not set.
const DEFAULT_SEED: u64 = 0x6d69_6372_6f6c_656e;

fn main() {
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));

    if let Err(e) =
        memory_x(&manifest_dir, &out).and_then(|map| model_consts(&manifest_dir, &out, &map))
    {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// Copies the selected board's memory map to `OUT_DIR/memory.x`, where `link.x` finds it (the context
/// cap is appended by [`model_consts`]), returns it, and writes
/// an empty `OUT_DIR/device.x`, which `link.x` includes with cortex-m-rt's `device` feature (a board's
/// PAC would provide its interrupt handlers there; the firmware has its own one-entry `__INTERRUPTS`,
/// see `src/board/mod.rs`).
fn memory_x(manifest_dir: &Path, out: &Path) -> Result<String, String> {
    let enabled: Vec<&str> = BOARDS
        .iter()
        .copied()
        .filter(|b| {
            env::var_os(format!(
                "CARGO_FEATURE_{}",
                b.to_uppercase().replace('-', "_")
            ))
            .is_some()
        })
        .collect();
    let [board] = enabled[..] else {
        return Err(format!("enable exactly one board feature out of {BOARDS:?} (found {enabled:?}), e.g. --features mps2-an386"));
    };
    println!("cargo:rustc-env=MICROLENS_BOARD={board}");
    // The board as a linker symbol too, `_microlens_board_<name>` (`-` as `_`), which the runner
    // (`cargo xtask runner ELF`) reads from the ELF to pick QEMU's machine or probe-rs's chip.
    let board_symbol = format!("_microlens_board_{} = 1;\n", board.replace('-', "_"));
    let src = manifest_dir.join("memory").join(format!("{board}.x"));
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-env-changed=MICROLENS_STACK_RESERVE");
    let map =
        fs::read_to_string(&src).map_err(|e| format!("{}: {e}", src.display()))? + &board_symbol;
    let full = env::var_os("CARGO_FEATURE_FULL").is_some();
    let map = match (
        env::var("MICROLENS_STACK_RESERVE"),
        bytes_after(&map, "_stack_reserve"),
    ) {
        (Ok(bytes), _) => with_stack_reserve(&map, &bytes)
            .map_err(|e| format!("MICROLENS_STACK_RESERVE={bytes}: {e} ({})", src.display()))?,
        (Err(_), Some(reserve)) if full => {
            with_stack_reserve(&map, &(reserve + FULL_STACK_EXTRA).to_string())?
        }
        (Err(_), _) => map,
    };
    fs::write(
        out.join("device.x"),
        "/* No device interrupt handlers: see build.rs. */\n",
    )
    .map_err(|e| format!("device.x: {e}"))?;
    println!("cargo:rustc-link-search={}", out.display());
    Ok(map)
}

/// The value of the first `NAME = <number><K|M>?` assignment in `map` after `key` (a memory region's
/// `LENGTH`, or `_stack_reserve`), in bytes.
fn bytes_after(map: &str, key: &str) -> Option<usize> {
    let line = map.lines().find(|l| l.trim_start().starts_with(key))?;
    let text = line.split_once(key)?.1;
    let value = match key {
        "_stack_reserve" => text,
        _ => text.split_once("LENGTH")?.1,
    };
    let value = value.trim_start_matches([' ', '=']);
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    let n: usize = digits.parse().ok()?;
    match value[digits.len()..].chars().next() {
        Some('K') => Some(n * 1024),
        Some('M') => Some(n * 1024 * 1024),
        _ => Some(n),
    }
}

/// The longest context (at most the model's) whose KV cache and workspace fit in the RAM of `map`
/// beside its stack reserve and [`OTHER_STATICS`].
fn context_cap(model: &microlens::Model<'_>, map: &str) -> Result<usize, String> {
    let ram =
        bytes_after(map, "RAM").ok_or("memory.x has no `RAM : ORIGIN = .., LENGTH = ..` line")?;
    let reserve =
        bytes_after(map, "_stack_reserve").ok_or("memory.x has no `_stack_reserve = N;` line")?;
    let serve = env::var_os("CARGO_FEATURE_SERVE").is_some();
    let free = ram.saturating_sub(reserve + OTHER_STATICS + if serve { SERVE_STATICS } else { 0 });
    // Below the model's context, the firmware also streams its prompt through a sliding window of the
    // cap: its tokens and kept keys ([`window_lens`]) share the RAM.
    let fits = |n: usize| {
        let (tokens, kept) = window_lens(model, n);
        let served = if serve { n } else { 0 };
        4 * (model.kv_cache_len_at(n) + model.workspace_len_at(n) + tokens + kept + served) <= free
    };
    let cap = (1..=model.config().n_ctx).rev().find(|&n| fits(n));
    cap.ok_or_else(|| {
        format!("not even one position's KV cache and the workspace fit in {free} B of RAM")
    })
}

/// Words of the window's token ring and kept keys for a context cap of `n` positions: none at the
/// model's full context (the firmware then streams no window).
fn window_lens(model: &microlens::Model<'_>, n: usize) -> (usize, usize) {
    match n < model.config().n_ctx {
        true => (n, microlens::Window::kept_len(model.config(), n)),
        false => (0, 0),
    }
}

/// `map` with its `_stack_reserve = N;` line set to `bytes` (a whole number of words).
fn with_stack_reserve(map: &str, bytes: &str) -> Result<String, String> {
    let reserve: u32 = bytes
        .parse()
        .map_err(|_| "not a number of bytes".to_string())?;
    if reserve % 8 != 0 {
        return Err("not a multiple of 8 (the stack's alignment)".into());
    }
    let mut found = false;
    let lines: Vec<String> = map
        .lines()
        .map(|line| match line.starts_with("_stack_reserve = ") {
            true => {
                found = true;
                format!("_stack_reserve = {reserve}; /* MICROLENS_STACK_RESERVE */")
            }
            false => line.to_string(),
        })
        .collect();
    match found {
        true => Ok(lines.join("\n") + "\n"),
        false => Err("the memory map has no `_stack_reserve = ` line".into()),
    }
}

/// Checks the blob and writes `OUT_DIR/model.rs`: its path and the sizes the firmware's buffers need.
fn model_consts(manifest_dir: &Path, out: &Path, map: &str) -> Result<(), String> {
    println!("cargo:rerun-if-env-changed=MICROLENS_BLOB");
    println!("cargo:rerun-if-env-changed=MICROLENS_SEED");
    let blob = env::var_os("MICROLENS_BLOB").unwrap_or_else(|| DEFAULT_BLOB.into());
    let blob = manifest_dir.join(blob);
    let blob = blob
        .canonicalize()
        .map_err(|e| format!("MICROLENS_BLOB={}: {e}", blob.display()))?;
    println!("cargo:rerun-if-changed={}", blob.display());
    let bytes = fs::read(&blob).map_err(|e| format!("{}: {e}", blob.display()))?;
    let model =
        microlens::Model::from_bytes(&bytes).map_err(|e| format!("{}: {e}", blob.display()))?;
    let cfg = model.config();
    check_features(&model)?;
    let n_ctx = context_cap(&model, map)?;
    if n_ctx < cfg.n_ctx {
        println!(
            "cargo:warning=the board's RAM holds the KV cache of {n_ctx} of the model's {} positions: the session's context is capped there",
            cfg.n_ctx
        );
    }
    // The cap and the RAM as linker symbols too, which `cargo xtask firmware` reads from the ELF.
    let ram = bytes_after(map, "RAM").unwrap_or(0);
    let map = format!(
        "{map}\n/* build.rs: the session's context (positions) and the board's RAM (bytes). */\n\
         _microlens_context = {n_ctx};\n_microlens_ram = {ram};\n"
    );
    fs::write(out.join("memory.x"), map).map_err(|e| format!("memory.x: {e}"))?;

    let seed = match env::var("MICROLENS_SEED") {
        Ok(s) => parse_seed(&s).ok_or(format!("MICROLENS_SEED={s}: not a u64"))?,
        Err(_) => DEFAULT_SEED,
    };
    let fact_prompt = token_list("MICROLENS_FACT_PROMPT", cfg.d_vocab, n_ctx)?;
    // Repeated once in the prompt, with room for the continuation (`Prompt::phrase`).
    let text_prompt = token_list("MICROLENS_TEXT_PROMPT", cfg.d_vocab, 3 * n_ctx / 8)?;
    let path = blob
        .to_str()
        .ok_or(format!("{}: path is not UTF-8", blob.display()))?;
    let consts = format!(
        "// Generated by build.rs from {path:?}.\n\
         /// `f32` words of KV cache the model needs ([`microlens::Model::kv_cache_len`]).\n\
         pub const KV_LEN: usize = {kv};\n\
         /// `f32` words of workspace the model needs ([`microlens::Model::workspace_len`]).\n\
         pub const WS_LEN: usize = {ws};\n\
         /// Layers of the model.\n\
         pub const N_LAYERS: usize = {layers};\n\
         /// Heads per layer.\n\
         pub const N_HEADS: usize = {heads};\n\
         /// Context length: the longest prompt.\n\
         pub const N_CTX: usize = {ctx};\n\
         /// The board (its cargo feature): serve mode's `Info`.\n\
         #[allow(dead_code)]\n\
         pub const BOARD: &str = env!(\"MICROLENS_BOARD\");\n\
         /// Seed of the prompt generator.\n\
         pub const SEED: u64 = {seed:#x};\n\
         /// A token of the prompt: the narrowest unsigned integer that holds every token id.\n\
         pub type Token = {token};\n\
         /// Whether the model is byte-level (`d_vocab` 256, token `b` the byte `b`): its prompt is then\n\
         /// English text and it also prints its greedy continuation as text.\n\
         pub const BYTES: bool = {text};\n\
         /// A text prompt's token ids (from `MICROLENS_TEXT_PROMPT`, encoded on the host by the model's\n\
         /// tokenizer): the prompt is then these tokens twice, and the firmware continues it. Empty\n\
         /// otherwise.\n\
         pub const TEXT_PROMPT: &[Token] = &{text_prompt:?};\n\
         /// Whether the prompt is text (a byte-level model's phrase or [`TEXT_PROMPT`]) that the\n\
         /// firmware continues greedily.\n\
         pub const TEXT: bool = BYTES || !TEXT_PROMPT.is_empty();\n\
         /// Width of the sliding window the prompt is streamed through (twice) when the context is capped\n\
         /// below the model's, 0 otherwise: its token ring's length.\n\
         pub const WINDOW: usize = {window};\n\
         /// `f32` words of the window's kept keys and values ([`microlens::Window::kept_len`]).\n\
         pub const WINDOW_KEPT: usize = {kept};\n\
         /// A fact model's prompt (`s1 s2 r`, from `MICROLENS_FACT_PROMPT`): the firmware also prints the\n\
         /// token it recalls. Empty for the induction demo.\n\
         pub const FACT_PROMPT: &[Token] = &{fact_prompt:?};\n",
        kv = model.kv_cache_len_at(n_ctx),
        ws = model.workspace_len_at(n_ctx),
        layers = cfg.n_layers,
        heads = cfg.n_heads,
        ctx = n_ctx,
        token = token_type(cfg.d_vocab),
        text = cfg.d_vocab == BYTE_VOCAB,
        window = window_lens(&model, n_ctx).0,
        kept = window_lens(&model, n_ctx).1,
    );
    fs::write(out.join("model.rs"), consts).map_err(|e| e.to_string())?;
    println!("cargo:rustc-env=MICROLENS_BLOB_PATH={path}");
    Ok(())
}

/// The narrowest unsigned integer type holding every token below `d_vocab`: the prompt is stored in it,
/// so it takes a quarter of the stack `u32` tokens would with a small vocabulary.
fn token_type(d_vocab: usize) -> &'static str {
    match d_vocab {
        0..=0x100 => "u8",
        0x101..=0x1_0000 => "u16",
        _ => "u32",
    }
}

/// Fails unless every microlens capability the blob needs is enabled (a feature of this crate of the
/// same name, or `full`), naming the features to add.
fn check_features(model: &microlens::Model<'_>) -> Result<(), String> {
    let enabled = |name: &str| {
        env::var_os(format!(
            "CARGO_FEATURE_{}",
            name.to_uppercase().replace('-', "_")
        ))
        .is_some()
    };
    if enabled("full") {
        return Ok(());
    }
    let needed = model.features();
    let missing: Vec<&str> = needed
        .names()
        .iter()
        .copied()
        .filter(|n| !enabled(n))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the blob needs the features {} (enable them, e.g. --features {}, or `full`)",
        missing.join(", "),
        needed.names().join(",")
    ))
}

/// The token ids of `var` (comma-separated), empty if unset: every token below `d_vocab`, 1 to
/// `max` of them (`MICROLENS_FACT_PROMPT`, `MICROLENS_TEXT_PROMPT`).
fn token_list(var: &str, d_vocab: usize, max: usize) -> Result<Vec<u32>, String> {
    println!("cargo:rerun-if-env-changed={var}");
    let Ok(text) = env::var(var) else {
        return Ok(Vec::new());
    };
    let tokens = text
        .split(',')
        .map(|t| match t.trim().parse::<u32>() {
            Ok(t) if (t as usize) < d_vocab => Ok(t),
            _ => Err(format!(
                "{var}={text}: {t:?} is not a token below {d_vocab}"
            )),
        })
        .collect::<Result<Vec<u32>, String>>()?;
    if tokens.is_empty() || tokens.len() > max {
        return Err(format!("{var}={text}: 1 to {max} tokens"));
    }
    Ok(tokens)
}

fn parse_seed(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}
