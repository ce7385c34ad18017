//! `microlens device SUBCOMMAND --port PORT`: a board in serve mode (`cargo xtask serve`, or a flashed
//! serve build) as an instrument: what it runs, its logits and hash, and its own activations under
//! TransformerLens names, read over its serial link.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use microlens::{HookKind, Model};

use microlens_host::device::{check_context, hook_suffixes, Device};
use microlens_host::eval::cache::{hook_name, write_tensors};
use microlens_host::eval::run::{check_sequences, check_tokens, RunOutput, DEFAULT_MAX_SEQ_LEN};
use microlens_host::eval::sequences::induction_sequences;
use microlens_host::fidelity::compare_runs;
use microlens_host::hash::hash_line;
use microlens_host::io::output::Outputs;
use microlens_host::io::tokens::parse_tokens;
use microlens_host::report::run::print_table;

use super::fidelity::{describe, print_report};
use super::run::names_regex;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The device: a serial port (`/dev/ttyACM0`) or QEMU's UART socket (`tcp:127.0.0.1:4000`).
    #[arg(long, global = true, default_value = "tcp:127.0.0.1:4000")]
    pub port: String,
    /// Baud rate of a serial port.
    #[arg(long, global = true, default_value_t = 115_200)]
    pub baud: u32,
    /// Seconds to wait for each answer before giving up.
    #[arg(long, global = true, default_value_t = 10.0)]
    pub timeout: f64,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `microlens device` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// What the board runs: its model, capabilities, hook points and build.
    Info,
    /// The device's logits for tokens (from position 0): a table, JSON, or its logits hash.
    Run {
        /// Comma-separated token ids, e.g. 3,1,4.
        #[arg(long, allow_hyphen_values = true)]
        tokens: String,
        /// Print one JSON object: "tokens", "logits" indexed by position then vocab.
        #[arg(long)]
        json: bool,
        /// Print only the device's `logits_hash=<16 hex digits>` (as `microlens run --hash`).
        #[arg(long)]
        hash: bool,
        /// Ask only for the K largest logits of each position (1..=16), and print them.
        #[arg(long, value_name = "K", conflicts_with_all = ["json", "hash"])]
        top_k: Option<u8>,
    },
    /// The device's own activations for tokens, under TransformerLens names and shapes, to safetensors
    /// (as `microlens run --cache`).
    Cache {
        /// Comma-separated token ids, e.g. 3,1,4.
        #[arg(long, allow_hyphen_values = true)]
        tokens: String,
        /// Output safetensors file.
        #[arg(short, long)]
        output: PathBuf,
        /// Only the hook names this regular expression matches (e.g. `hook_pattern|resid`).
        #[arg(long)]
        names: Option<String>,
    },
    /// `microlens fidelity REFERENCE.mlb` with the device as the candidate: its logits and attention
    /// patterns read over the wire, its blob read back for the weight figures.
    Fidelity {
        /// The reference blob (typically f32).
        reference: PathBuf,
        /// Number of random sequences (each a random prefix, then a random segment repeated).
        #[arg(long, default_value_t = 20)]
        sequences: usize,
        /// Length of each random sequence [default: the device's context, at most 256].
        #[arg(long)]
        seq_len: Option<usize>,
        /// Seed of the random sequences.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    ensure!(
        args.timeout > 0.0 && args.timeout.is_finite(),
        "--timeout must be a positive number of seconds"
    );
    let timeout = Duration::from_secs_f64(args.timeout);
    let mut device = Device::open(&args.port, args.baud, timeout)?;
    match args.command {
        Command::Info => info(&mut device),
        Command::Run {
            tokens,
            top_k: Some(k),
            ..
        } => top_k(&mut device, &tokens, k),
        Command::Run {
            tokens, json, hash, ..
        } => run_tokens(&mut device, &tokens, json, hash),
        Command::Cache {
            tokens,
            output,
            names,
        } => cache(&mut device, &tokens, &output, names.as_deref()),
        Command::Fidelity {
            reference,
            sequences,
            seq_len,
            seed,
            json,
        } => fidelity(
            &mut device,
            &args.port,
            &reference,
            sequences,
            seq_len,
            seed,
            json,
        ),
    }
}

fn info(device: &mut Device) -> Result<()> {
    let info = device.info()?;
    println!(
        "board: {} (firmware {}, protocol {})",
        info.board, info.firmware, info.protocol
    );
    println!(
        "model: n_layers {} n_heads {} d_model {} d_head {} d_vocab {} d_vocab_out {} n_ctx {}",
        info.n_layers,
        info.n_heads,
        info.d_model,
        info.d_head,
        info.d_vocab,
        info.d_vocab_out,
        info.n_ctx
    );
    println!("context: {} positions", info.context);
    println!("capabilities: {}", info.features);
    let hooks = hook_suffixes(&info);
    println!("hook points: {}", hooks.join(","));
    println!(
        "blob: {} bytes, fnv1a64 {:016x}",
        info.blob_len, info.blob_hash
    );
    println!("max frame: {} bytes", info.max_frame);
    Ok(())
}

/// The tokens of `--tokens`, checked against the device's model (read back from it).
fn device_tokens(device: &mut Device, text: &str) -> Result<(Vec<u8>, Vec<u32>)> {
    let info = device.info()?;
    let blob = device.blob(&info)?;
    let tokens = parse_tokens(text)?;
    let model = Model::from_bytes(&blob).context("the device's blob")?;
    check_tokens(&model, &tokens)?;
    check_context(&info, tokens.len())?;
    Ok((blob, tokens))
}

fn run_tokens(device: &mut Device, text: &str, json: bool, hash_only: bool) -> Result<()> {
    let (_, tokens) = device_tokens(device, text)?;
    device.reset()?;
    let received = device.traffic().0;
    let logits = device.step(&tokens)?;
    let step_bytes = device.traffic().0 - received;
    let hash = device.checked_hash(&logits)?;
    match (json, hash_only) {
        (true, _) => {
            let mut out = serde_json::json!({ "tokens": tokens, "logits": logits });
            if hash_only {
                out["logits_hash"] = format!("{hash:016x}").into();
            }
            println!("{out}");
        }
        (false, true) => println!("{}", hash_line(hash)),
        (false, false) => {
            eprintln!(
                "received {step_bytes} bytes of logits for {} positions",
                tokens.len()
            );
            print_table(
                &tokens,
                None,
                &RunOutput {
                    logits,
                    patterns: Vec::new(),
                },
            )
        }
    }
    Ok(())
}

fn top_k(device: &mut Device, text: &str, k: u8) -> Result<()> {
    let (_, tokens) = device_tokens(device, text)?;
    device.reset()?;
    let received = device.traffic().0;
    let top = device.step_top_k(&tokens, k)?;
    for (pos, (token, entries)) in tokens.iter().zip(&top).enumerate() {
        let list: Vec<String> = entries.iter().map(|(t, v)| format!("{t}:{v:.3}")).collect();
        println!("{pos:>4} {token:>6}  {}", list.join(" "));
    }
    eprintln!(
        "received {} bytes for {} positions",
        device.traffic().0 - received,
        tokens.len()
    );
    let (positions, _) = device.hash()?;
    ensure!(
        positions as usize == tokens.len(),
        "the device holds {positions} positions"
    );
    Ok(())
}

fn cache(device: &mut Device, text: &str, output: &Path, names: Option<&str>) -> Result<()> {
    let names = names_regex(names)?;
    let outputs = Outputs::new();
    outputs.check(output)?;
    let (blob, tokens) = device_tokens(device, text)?;
    let model = Model::from_bytes(&blob).context("the device's blob")?;
    let cfg = *model.config();
    device.reset()?;
    device.step(&tokens)?;
    let n = tokens.len();
    let cache = device.read_cache(&cfg, n, true, |name| {
        names.as_ref().is_none_or(|re| re.is_match(name))
    })?;
    // The device's hash of the logits of the replays, as a last check that it still serves (and its
    // stack high-water mark, which it logs).
    let (positions, _) = device.hash()?;
    ensure!(
        positions as usize == n,
        "the device holds {positions} positions, not {n}"
    );
    let written = write_tensors(&cache, &cfg, n, names.as_ref(), &outputs, output)?;
    eprintln!(
        "wrote {} activations read from the device to {} ({} bytes received)",
        written.len(),
        output.display(),
        device.traffic().0
    );
    Ok(())
}

/// The device as `fidelity`'s candidate.
fn fidelity(
    device: &mut Device,
    port: &str,
    reference: &Path,
    sequences: usize,
    seq_len: Option<usize>,
    seed: u64,
    json: bool,
) -> Result<()> {
    let ref_bytes = microlens_host::io::files::read_blob(reference)?;
    let ref_model =
        Model::from_bytes(&ref_bytes).with_context(|| reference.display().to_string())?;
    let info = device.info()?;
    let blob = device.blob(&info)?;
    let candidate = Model::from_bytes(&blob).context("the device's blob")?;
    let len = seq_len.unwrap_or((info.context as usize).min(DEFAULT_MAX_SEQ_LEN));
    ensure!(
        (1..=info.context as usize).contains(&len),
        "--seq-len must be in 1..={} (the device's context)",
        info.context
    );
    check_sequences("--sequences", sequences, len)?;
    let cfg = *ref_model.config();
    let seqs = induction_sequences(sequences, len, cfg.d_vocab, seed);
    let report = compare_runs(
        &ref_model,
        &candidate,
        &seqs,
        |tokens| device_run(device, &cfg, tokens),
        || eprint!("."),
    )?;
    eprintln!();
    let mut c = describe(Path::new(port), &candidate);
    c["device"] = serde_json::json!(info.board.as_str());
    print_report(&report, json, describe(reference, &ref_model), c)
}

/// The device's logits and attention patterns (`[layer][head][query][key]`, zero above the diagonal)
/// for `tokens` from position 0.
fn device_run(device: &mut Device, cfg: &microlens::Config, tokens: &[u32]) -> Result<RunOutput> {
    device.reset()?;
    let logits = device.step(tokens)?;
    let n = tokens.len();
    let mut patterns = Vec::with_capacity(cfg.n_layers);
    for layer in 0..cfg.n_layers {
        let name = hook_name(HookKind::Pattern, layer);
        let mut heads = Vec::with_capacity(cfg.n_heads);
        for head in 0..cfg.n_heads {
            let rows = device
                .read(&name, head, (0, n), false)?
                .with_context(|| format!("the device has no {name}"))?;
            let square = rows
                .into_iter()
                .map(|mut row| {
                    row.resize(n, 0.0);
                    row
                })
                .collect();
            heads.push(square);
        }
        patterns.push(heads);
    }
    Ok(RunOutput { logits, patterns })
}
