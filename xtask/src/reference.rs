//! The host's logits hash for the device's prompt, and a byte-level model's greedy continuation, to
//! check that device and host computed the same bits.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use microlens::{Model, Session, Window};

/// Who computes the host side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Reference {
    /// `microlens run BLOB --tokens ... --hash` (the host tool).
    HostTool,
    /// The core crate inside xtask, stepping a `Session` (no host tool needed).
    Core,
}

/// FNV-1a 64 over the little-endian bytes of every logit of every position, as the firmware hashes.
pub fn core_hash(blob: &Path, tokens: &[u32]) -> Result<u64> {
    let bytes = std::fs::read(blob).with_context(|| format!("cannot read {}", blob.display()))?;
    let model = Model::from_bytes(&bytes)?;
    let mut kv = vec![0.0; model.kv_cache_len()];
    let mut ws = vec![0.0; model.workspace_len()];
    let mut session = Session::new(&model, &mut kv, &mut ws)?;
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &t in tokens {
        for b in session.step(t)?.iter().flat_map(|l| l.to_le_bytes()) {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    Ok(hash)
}

/// The `n` tokens greedy decoding appends to `prompt` (each argmax fed back), by the core crate.
pub fn core_continuation(blob: &Path, prompt: &[u32], n: usize) -> Result<Vec<u32>> {
    let bytes = std::fs::read(blob).with_context(|| format!("cannot read {}", blob.display()))?;
    let model = Model::from_bytes(&bytes)?;
    let mut kv = vec![0.0; model.kv_cache_len()];
    let mut ws = vec![0.0; model.workspace_len()];
    let mut session = Session::new(&model, &mut kv, &mut ws)?;
    let argmax = |l: &[f32]| (0..l.len()).fold(0, |b, i| if l[i] > l[b] { i } else { b }) as u32;
    let mut next = 0;
    for &t in prompt {
        next = argmax(session.step(t)?);
    }
    let mut out = vec![next];
    while out.len() < n {
        next = argmax(session.step(next)?);
        out.push(next);
    }
    out.truncate(n);
    Ok(out)
}

/// The tokens printed by `microlens generate BLOB --tokens ... --max-new-tokens n --json`.
pub fn host_tool_continuation(
    tool: &Path,
    blob: &Path,
    prompt: &[u32],
    n: usize,
) -> Result<Vec<u32>> {
    Ok(host_tool_generate(tool, blob, prompt, n, None)?.0)
}

/// `microlens generate BLOB --tokens ... --max-new-tokens n --json` (with `--tokenizer` if given):
/// the new tokens, and their text when the blob has a tokenizer.
pub fn host_tool_generate(
    tool: &Path,
    blob: &Path,
    prompt: &[u32],
    n: usize,
    tokenizer: Option<&Path>,
) -> Result<(Vec<u32>, Option<String>)> {
    let list: Vec<String> = prompt.iter().map(u32::to_string).collect();
    let mut cmd = Command::new(tool);
    cmd.arg("generate")
        .arg(blob)
        .args(["--tokens", &list.join(",")])
        .args(["--max-new-tokens", &n.to_string(), "--json"]);
    if let Some(t) = tokenizer {
        cmd.arg("--tokenizer").arg(t);
    }
    let stdout = host_tool_output(&mut cmd)?;
    #[derive(serde::Deserialize)]
    struct Generated {
        tokens: Vec<u32>,
        text: Option<String>,
    }
    let g: Generated = serde_json::from_str(stdout.trim())
        .with_context(|| format!("microlens generate printed no tokens: {stdout}"))?;
    Ok((g.tokens, g.text))
}

/// The token ids `microlens run BLOB --text TEXT --json` reads `text` as (BOS first when the
/// model's tokenizer has one), with `tokenizer` or else the one beside the blob.
pub fn host_tool_tokens(
    tool: &Path,
    blob: &Path,
    text: &str,
    tokenizer: Option<&Path>,
) -> Result<Vec<u32>> {
    let mut cmd = Command::new(tool);
    cmd.arg("run").arg(blob).args(["--text", text, "--json"]);
    if let Some(t) = tokenizer {
        cmd.arg("--tokenizer").arg(t);
    }
    let stdout = host_tool_output(&mut cmd)?;
    #[derive(serde::Deserialize)]
    struct Run {
        tokens: Vec<u32>,
    }
    let r: Run = serde_json::from_str(stdout.trim())
        .with_context(|| format!("microlens run printed no tokens: {stdout}"))?;
    Ok(r.tokens)
}

/// [`core_hash`] of `tokens` streamed through a sliding window of `width` tokens.
pub fn core_window_hash(blob: &Path, tokens: &[u32], width: usize) -> Result<u64> {
    let bytes = std::fs::read(blob).with_context(|| format!("cannot read {}", blob.display()))?;
    let model = Model::from_bytes(&bytes)?;
    let mut kv = vec![0.0; model.kv_cache_len_at(width)];
    let mut ws = vec![0.0; model.workspace_len_at(width)];
    let mut session = Session::with_context(&model, width, &mut kv, &mut ws)?;
    let (mut ring, mut kept) = (
        vec![0; width],
        vec![0.0; Window::kept_len(model.config(), width)],
    );
    let mut window = Window::new(&mut session, width, &mut ring, &mut kept)?;
    let mut hash = microlens::hash::Fnv1a64::new();
    for &t in tokens {
        hash.write_f32s(window.step(t)?);
    }
    Ok(hash.finish())
}

/// The hash printed by `microlens run BLOB --tokens ... --hash` (its `logits_hash=` line).
pub fn host_tool_hash(tool: &Path, blob: &Path, tokens: &[u32]) -> Result<u64> {
    tool_hash(tool, blob, tokens, &[])
}

/// The hash printed by `microlens run BLOB --tokens ... --window WIDTH --hash`.
pub fn host_tool_window_hash(
    tool: &Path,
    blob: &Path,
    tokens: &[u32],
    width: usize,
) -> Result<u64> {
    tool_hash(tool, blob, tokens, &["--window", &width.to_string()])
}

/// `microlens run BLOB --tokens ... EXTRA --hash`'s `logits_hash=`.
fn tool_hash(tool: &Path, blob: &Path, tokens: &[u32], extra: &[&str]) -> Result<u64> {
    let list: Vec<String> = tokens.iter().map(u32::to_string).collect();
    let stdout = host_tool_output(
        Command::new(tool)
            .arg("run")
            .arg(blob)
            .args(["--tokens", &list.join(",")])
            .args(extra)
            .arg("--hash"),
    )?;
    let hex = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("logits_hash="))
        .with_context(|| format!("microlens run printed no logits_hash=: {stdout}"))?;
    u64::from_str_radix(hex.trim(), 16).with_context(|| format!("bad logits_hash={hex}"))
}

/// Runs the host tool; its standard output, or its error.
fn host_tool_output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
    if !out.status.success() {
        bail!(
            "{:?} failed ({}): {}",
            cmd.get_args().collect::<Vec<_>>(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
