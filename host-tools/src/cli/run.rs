//! `microlens run`: tokens through a blob with the core's `Session`; the top next tokens, or JSON logits and
//! patterns, or the logits hash the firmware prints too.

use std::path::PathBuf;

use anyhow::{Context, Result};
use microlens::Model;

use microlens::WindowMode;
use microlens_host::eval::run::{run_model, RunOutput};
use microlens_host::eval::window::run_window;
use microlens_host::hash::{hash_line, logits_hash};
use microlens_host::io::output::Outputs;
use microlens_host::report::run::print_table;

use super::text_input::TokenArgs;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb).
    pub model: PathBuf,
    /// The tokens: `--tokens 3,1,4` or `--text "..."`.
    #[command(flatten)]
    pub input: TokenArgs,
    /// Print one JSON object: "logits" indexed by position then vocab, "patterns" by layer, head,
    /// query, key (without --window).
    #[arg(long)]
    pub json: bool,
    /// Print only `logits_hash=<16 hex digits>` (FNV-1a 64 of every logit's f32 bytes); with --json, add a
    /// "logits_hash" field instead.
    #[arg(long)]
    pub hash: bool,
    /// Also write every hook activation to this safetensors file, under its TransformerLens name and shape
    /// without the batch dimension (`blocks.0.attn.hook_q` [pos, head, d_head], ...).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Slide a context window of W tokens (1..=n_ctx) over the tokens, which may then be longer than n_ctx:
    /// at every position the logits of a fresh run over the last W tokens (docs/window.md).
    #[arg(long, value_name = "W", conflicts_with = "cache")]
    pub window: Option<usize>,
    /// With --cache: only the activations one of whose names this regular expression matches (e.g.
    /// `hook_pattern|resid`), each written under the first name that matches: TransformerLens 2.x's,
    /// then 4.x's canonical aliases (`blocks.0.attn.q.hook_out` for `blocks.0.attn.hook_q`).
    #[arg(long, requires = "cache")]
    pub names: Option<String>,
}

/// What `--json` prints; `f32`s are written in their shortest exact form.
#[derive(serde::Serialize)]
struct RunJson<'a> {
    tokens: &'a [u32],
    #[serde(skip_serializing_if = "Option::is_none")]
    str_tokens: Option<&'a [String]>,
    logits: &'a [Vec<f32>],
    #[serde(skip_serializing_if = "Option::is_none")]
    patterns: Option<&'a [Vec<Vec<Vec<f32>>>]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    logits_hash: Option<String>,
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let names = names_regex(args.names.as_deref())?;
    let outputs = Outputs::with_inputs([args.model.as_path()]);
    if let Some(path) = &args.cache {
        outputs.check(path)?;
    }
    let bytes = microlens_host::io::files::read_blob(&args.model)?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    let input = args.input.resolve(&model, &args.model)?;
    let tokens = input.ids;
    // The host's column-blocked weights: the same bits, faster.
    let host = microlens::host::HostWeights::new(&model);
    let model = model.with_host(&host);
    let out = match args.window {
        Some(width) => {
            let (logits, mode) = run_window(&model, &tokens, width)?;
            if !args.json && !args.hash {
                println!("window: {width} tokens, sliding by {}", mode_name(mode));
            }
            RunOutput {
                logits,
                patterns: Vec::new(),
            }
        }
        None => {
            if tokens.len() > model.config().n_ctx {
                anyhow::bail!(
                    "{} tokens given, but the model's context is n_ctx = {}: --window W (at most n_ctx) \
                     slides a context window over a longer stream",
                    tokens.len(),
                    model.config().n_ctx
                );
            }
            run_model(&model, &tokens)?
        }
    };
    if let Some(path) = &args.cache {
        let written = microlens_host::eval::cache::write_cache(
            &model,
            &tokens,
            names.as_ref(),
            &outputs,
            path,
        )?;
        eprintln!("wrote {} activations to {}", written.len(), path.display());
    }
    let hash = logits_hash(out.logits.iter().map(Vec::as_slice));
    match (args.json, args.hash) {
        (true, hash_too) => {
            let json = RunJson {
                tokens: &tokens,
                str_tokens: input.str_tokens.as_deref(),
                logits: &out.logits,
                patterns: args.window.is_none().then_some(&out.patterns[..]),
                window: args.window,
                logits_hash: hash_too.then(|| format!("{hash:016x}")),
            };
            println!("{}", serde_json::to_string(&json)?);
        }
        (false, true) => println!("{}", hash_line(hash)),
        (false, false) => print_table(&tokens, input.str_tokens.as_deref(), &out),
    }
    Ok(())
}

/// The `--names` pattern, compiled (a one-line error naming it if it is not a regular expression).
pub fn names_regex(pattern: Option<&str>) -> Result<Option<regex::Regex>> {
    pattern
        .map(|p| {
            regex::Regex::new(p).map_err(|e| {
                let why = e.to_string();
                let why = why.lines().last().unwrap_or("invalid").trim().to_owned();
                let p = microlens_host::excerpt::excerpt(p);
                anyhow::anyhow!("--names {p:?} is not a regular expression: {why}")
            })
        })
        .transpose()
}

/// How a window slides, in words.
fn mode_name(mode: WindowMode) -> &'static str {
    match mode {
        WindowMode::ReEncode => "re-encoding the window",
        WindowMode::Restore => "re-rotating the cached keys (one-layer rotary)",
    }
}
