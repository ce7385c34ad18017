//! `cargo xtask profile`: where a token's instructions go on the device, per function.
//!
//! Runs a firmware ELF (by default the one `cargo xtask firmware` built last) on QEMU's mps2-an386 one
//! instruction per translation block with every block's execution logged (`-singlestep -d exec,nochain`),
//! so the log has one line per executed instruction. Only the firmware's timed steps of its first
//! (plain, hook-free) pass are counted: the instructions between the first and the second call of the
//! board's instruction counter (its `now`), the second and the third, and so on, until the pass ends. Each
//! counted address is then attributed with `llvm-addr2line -i` to its innermost inlined function and
//! source file (the release profile keeps line tables), and the totals are printed per token, largest
//! first, by function and by file.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use object::read::elf::ElfFile32;
use object::{Object, ObjectSymbol};

use crate::paths::firmware_dir;

/// Arguments of `cargo xtask profile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Firmware ELF [default: the QEMU build `cargo xtask firmware` made last].
    #[arg(long)]
    elf: Option<PathBuf>,
    /// Rows printed per table.
    #[arg(long, default_value_t = 25)]
    top: usize,
    /// Also list the most executed addresses (to read against `llvm-objdump -d`).
    #[arg(long)]
    addresses: bool,
    /// The emulated board the ELF was built for.
    #[arg(long, value_enum, default_value_t = crate::boards::Board::Mps2An386)]
    board: crate::boards::Board,
}

/// Runs `cargo xtask profile`.
pub fn run(args: Args) -> Result<()> {
    let elf = args.elf.clone().unwrap_or_else(|| {
        firmware_dir().join("target/thumbv7em-none-eabihf/release/microlens-firmware-example")
    });
    let bytes = std::fs::read(&elf).with_context(|| format!("cannot read {}", elf.display()))?;
    let file = ElfFile32::<object::Endianness>::parse(&*bytes)?;
    // The board's instruction counter (`now` of its counter type), the plain pass and the next phase.
    let span = |(start, len): (u32, u32)| (start, start + len);
    let ranges = Ranges {
        now: span(symbol(&file, "19SysTickInstructions").or_else(|_| symbol(&file, "7Counter"))?),
        plain: span(symbol(&file, "10plain_pass")?),
        next: span(symbol(&file, "11score_heads")?),
    };
    let (counts, tokens) = trace(&elf, args.board, &ranges)?;
    let frames = symbolize(&elf, counts.keys().copied())?;
    print_report(&args, &counts, tokens, &frames);
    Ok(())
}

/// The address ranges `[start, end)` of the functions the trace is cut by.
struct Ranges {
    /// The board's instruction counter: each call starts or ends a timed step.
    now: (u32, u32),
    /// The plain pass, whose timed steps are counted.
    plain: (u32, u32),
    /// The phase after it, where counting stops.
    next: (u32, u32),
}

/// Runs `elf` on QEMU with every executed instruction logged and counts the executions of each address
/// inside the plain pass's timed steps; returns the counts and the number of timed steps (tokens).
fn trace(elf: &Path, board: crate::boards::Board, r: &Ranges) -> Result<(HashMap<u32, u64>, u64)> {
    eprintln!(
        "xtask: tracing {} on QEMU (one line per instruction)",
        elf.display()
    );
    let mut qemu = crate::qemu::command(board.spec().runs, None, elf)?;
    let mut qemu = qemu
        .args(["-singlestep", "-d", "exec,nochain"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start qemu-system-arm")?;
    let log = BufReader::with_capacity(1 << 20, qemu.stderr.take().context("no QEMU stderr")?);
    let mut counts: HashMap<u32, u64> = HashMap::new();
    let (mut in_pass, mut timing, mut calls) = (false, false, 0u64);
    for line in log.lines() {
        let line = line?;
        let Some(pc) = trace_pc(&line) else { continue };
        let inside = |r: (u32, u32)| (r.0..r.1).contains(&(pc & !1));
        if !in_pass {
            in_pass = inside(r.plain);
        } else if pc & !1 == r.now.0 {
            // Entering the counter: a timed step starts or ends here.
            timing = !timing;
            calls += 1;
        }
        if timing && !inside(r.now) {
            *counts.entry(pc).or_default() += 1;
        }
        if calls >= 2 && !timing && inside(r.next) {
            break;
        }
    }
    let _ = qemu.kill();
    let _ = qemu.wait();
    let tokens = calls / 2;
    if tokens == 0 {
        bail!("no timed step found in the trace");
    }
    Ok((counts, tokens))
}

/// Prints the instructions per token, the hottest addresses if asked, and the tables by function and
/// by file (`frames`: each address's innermost inlined function and file).
fn print_report(
    args: &Args,
    counts: &HashMap<u32, u64>,
    tokens: u64,
    frames: &HashMap<u32, (String, String)>,
) {
    let total: u64 = counts.values().sum();
    println!("tokens={tokens}");
    println!("instructions_per_token={}", total / tokens);
    if args.addresses {
        let mut hot: Vec<_> = counts.iter().collect();
        hot.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        println!("\nhottest addresses (executions per token, function):");
        for (pc, n) in hot.into_iter().take(args.top) {
            let function = frames.get(pc).map_or("", |f| f.0.as_str());
            println!("{pc:#010x} {:>7} {function}", n / tokens);
        }
    }
    let mut by_fn: HashMap<String, u64> = HashMap::new();
    let mut by_file: HashMap<String, u64> = HashMap::new();
    for (pc, n) in counts {
        let (function, file) = frames.get(pc).cloned().unwrap_or_default();
        *by_fn.entry(function).or_default() += n;
        *by_file.entry(file).or_default() += n;
    }
    for (title, table) in [("function", by_fn), ("file", by_file)] {
        println!("\nby innermost inlined {title} (instructions per token, share):");
        let mut rows: Vec<_> = table.into_iter().collect();
        rows.sort_by_key(|row| std::cmp::Reverse(row.1));
        for (name, n) in rows.into_iter().take(args.top) {
            let share = 100.0 * n as f64 / total as f64;
            println!("{:>9} {share:5.1}%  {name}", n / tokens);
        }
    }
}

/// Address and size of the first function symbol, not a closure, whose mangled name contains `part`
/// (for a counter type, its `now` method).
fn symbol(file: &ElfFile32<'_, object::Endianness>, part: &str) -> Result<(u32, u32)> {
    let method = part.ends_with("Counter") || part.ends_with("Instructions");
    let wanted = |n: &str| {
        let closure = n.starts_with("_RNC") || n.contains("closure");
        n.contains(part) && !closure && (!method || n.contains("3now"))
    };
    file.symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .find(|s| s.name().is_ok_and(wanted))
        .map(|s| ((s.address() as u32) & !1, s.size() as u32))
        .with_context(|| format!("no function symbol containing {part}"))
}

/// The guest PC of a `-d exec` line: `Trace 0: 0x... [cs_base/pc/flags/cflags] ...`.
fn trace_pc(line: &str) -> Option<u32> {
    let fields = line.strip_prefix("Trace ")?.split_once('[')?.1;
    let pc = fields.split('/').nth(1)?;
    u32::from_str_radix(pc, 16).ok()
}

/// The innermost inlined function of the project or libm (else the innermost) and its source file, of every address, by
/// `llvm-addr2line -a -f -i -C`.
fn symbolize(
    elf: &std::path::Path,
    pcs: impl Iterator<Item = u32>,
) -> Result<HashMap<u32, (String, String)>> {
    let mut child = Command::new("llvm-addr2line")
        .args(["-a", "-f", "-i", "-C", "-e"])
        .arg(elf)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start llvm-addr2line")?;
    let mut input = String::new();
    for pc in pcs {
        input.push_str(&format!("{:#x}\n", pc & !1));
    }
    let mut stdin = child.stdin.take().context("no stdin")?;
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output()?;
    writer.join().ok();
    let mut frames = HashMap::new();
    let mut lines = String::from_utf8_lossy(&out.stdout)
        .into_owned()
        .lines()
        .map(str::to_owned)
        .collect::<Vec<_>>()
        .into_iter()
        .peekable();
    while let Some(line) = lines.next() {
        let Some(hex) = line.strip_prefix("0x") else {
            continue;
        };
        let pc = u32::from_str_radix(hex, 16)?;
        // Frames innermost first: the first of the project's or libm's (not `core`'s iterators).
        let mut frames_here = Vec::new();
        while lines.peek().is_some_and(|l| !l.starts_with("0x")) {
            let function = lines.next().unwrap_or_default();
            let location = lines.next().unwrap_or_default();
            frames_here.push((function, location));
        }
        let ours = |f: &str| f.contains("microlens") || f.contains("libm::");
        let (function, location) = frames_here
            .iter()
            .find(|(f, _)| ours(f))
            .or(frames_here.first())
            .cloned()
            .unwrap_or_default();
        let file = location
            .rsplit_once(':')
            .map_or(location.as_str(), |(f, _)| f);
        let file = file.rsplit('/').take(2).collect::<Vec<_>>();
        let file = file.into_iter().rev().collect::<Vec<_>>().join("/");
        frames.insert(pc, (function, file));
        frames.insert(pc | 1, frames[&pc].clone());
    }
    Ok(frames)
}
