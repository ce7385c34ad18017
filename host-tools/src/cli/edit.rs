//! `microlens edit MODEL.mlb --prompt 2,21,33 --target 40 -o EDITED.mlb` (ROME, one fact at one layer)
//! or `--facts FILE` (MEMIT, several facts spread over layers): write new facts into the MLPs' `W_out`,
//! then report efficacy, specificity and whether the edit survives quantisation.

use std::path::PathBuf;

use anyhow::{bail, ensure, Context, Result};
use microlens::{DType, Model};
use serde_json::json;

use microlens_host::edit::blob::check_editable;
use microlens_host::edit::keys::random_sequences;
use microlens_host::edit::measure::{mean_kl, recall, survival, Recall};
use microlens_host::edit::update::{memit, rome, EditOptions, Request};
use microlens_host::edit::value::ValueOptions;
use microlens_host::eval::run::check_sequences;
use microlens_host::io::output::Outputs;
use microlens_host::io::tokens::parse_tokens;
use microlens_host::train::facts::{read_facts_file, PromptTarget};

use super::convert::DTypeName;
use super::text_input::{Text, TokenizerArgs};
use super::trace::parse_range;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The blob (.mlb, f32 weights), a model with MLPs.
    pub model: PathBuf,
    /// Prompt tokens, comma-separated (one fact, ROME).
    #[arg(long, allow_hyphen_values = true, required_unless_present_any = ["facts", "prompt_text"])]
    pub prompt: Option<String>,
    /// The new next token after the prompt.
    #[arg(long, required_unless_present_any = ["facts", "target_text"], conflicts_with = "facts")]
    pub target: Option<u32>,
    /// The prompt as text, e.g. "The Eiffel Tower is in" (one fact, ROME).
    #[arg(long, conflicts_with_all = ["prompt", "facts"])]
    pub prompt_text: Option<String>,
    /// The new next token as text, e.g. " Rome": it must be one token.
    #[arg(long, conflicts_with_all = ["target", "facts"])]
    pub target_text: Option<String>,
    /// The subject as text, e.g. "The Eiffel Tower": the tokens it covers in --prompt-text (instead of
    /// --subject).
    #[arg(long, requires = "prompt_text", conflicts_with = "subject")]
    pub subject_text: Option<String>,
    /// The tokenizer options of the text arguments.
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
    /// Several facts, one `t1,t2,... -> target` per line (MEMIT over --layers).
    #[arg(long, conflicts_with = "prompt")]
    pub facts: Option<PathBuf>,
    /// Subject positions `START..END` of every prompt; the key is read at `END - 1` [default: all but
    /// the last token].
    #[arg(long)]
    pub subject: Option<String>,
    /// Layer whose MLP is edited (ROME) [default: (n_layers - 1) / 2: early enough that the later
    /// layers' attention carries the change from the subject to the last position].
    #[arg(long, conflicts_with = "facts")]
    pub layer: Option<usize>,
    /// Layers `START..END` the facts are spread over (MEMIT) [default: 0 up to and including
    /// (n_layers - 1) / 2, the ROME layer].
    #[arg(long, conflicts_with = "prompt")]
    pub layers: Option<String>,
    /// Unrelated prompts for the KL (a facts file; lines sharing an edited prompt's subject are
    /// skipped) [default: 256 random sequences of the first prompt's length].
    #[arg(long)]
    pub unrelated: Option<PathBuf>,
    /// Random calibration sequences (n_ctx tokens) for the keys' second moment.
    #[arg(long, default_value_t = 1000)]
    pub calibration: usize,
    /// Ridge added to the keys' second moment, as a fraction of its mean diagonal.
    #[arg(long, default_value_t = 0.01)]
    pub ridge: f64,
    /// MEMIT's weight of the keys' second moment against the new facts' keys.
    #[arg(long, default_value_t = 10.0)]
    pub lambda: f64,
    /// Seed of the random sequences.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Dtypes the edited model is quantised to, to see whether the edit survives (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [DTypeName::F16, DTypeName::I8, DTypeName::I4])]
    pub dtypes: Vec<DTypeName>,
    /// Do not quantise the edited model (no per-dtype figures).
    #[arg(long, conflicts_with_all = ["dtypes", "gptq"])]
    pub no_quantise: bool,
    /// Quantise with each dtype's default rounding (GPTQ, as `convert --dtype D` does; slower) instead
    /// of rounding to nearest.
    #[arg(long)]
    pub gptq: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The edited blob (f32).
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
}

/// The default ROME layer (and MEMIT's top layer): `(n_layers - 1) / 2`.
fn default_layer(n_layers: usize) -> usize {
    n_layers.saturating_sub(1) / 2
}

/// The facts to write, and the subject's positions when given as text: `--facts`, or one prompt and
/// target by ids or by text.
fn facts(args: &Args, text: &Text) -> Result<(Vec<PromptTarget>, Option<std::ops::Range<usize>>)> {
    if let Some(path) = &args.facts {
        return Ok((read_facts_file(path)?, None));
    }
    let (prompt, subject) = match (&args.prompt, &args.prompt_text) {
        (Some(p), None) => (parse_tokens(p)?, None),
        (None, Some(p)) => {
            let encoded = text.encode(p)?;
            let subject = args
                .subject_text
                .as_deref()
                .map(|s| microlens_host::text::span::token_range(p, &encoded, s))
                .transpose()?;
            (encoded.ids, subject)
        }
        _ => bail!("give --prompt or --prompt-text (and --target or --target-text), or --facts"),
    };
    let target = match (args.target, &args.target_text) {
        (Some(t), None) => t,
        (None, Some(t)) => text.one_token(t, "--target-text")?,
        _ => bail!("give --target or --target-text"),
    };
    Ok((vec![PromptTarget { prompt, target }], subject))
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let mut outputs = Outputs::with_inputs([args.model.as_path()]);
    for path in [&args.facts, &args.unrelated].into_iter().flatten() {
        outputs.input(path);
    }
    let mut pending = outputs.create(&args.output)?;
    ensure!(
        args.ridge.is_finite() && args.ridge > 0.0 && args.lambda.is_finite() && args.lambda > 0.0,
        "--ridge and --lambda must be positive"
    );
    let dtypes: Vec<DType> = if args.no_quantise {
        Vec::new()
    } else {
        args.dtypes.iter().map(|&d| DType::from(d)).collect()
    };
    let bytes = microlens_host::io::files::read_blob(&args.model)?;
    let model = Model::from_bytes(&bytes).with_context(|| format!("{}", args.model.display()))?;
    check_editable(&model)?;
    let text = args.tokenizer.open(&model, &args.model)?;
    let (facts, subject_text) = facts(&args, &text)?;
    let cfg = *model.config();
    check_sequences("--calibration", args.calibration, cfg.n_ctx)?;
    check_sequences("--facts", facts.len(), cfg.n_ctx)?;
    let reqs = facts
        .iter()
        .map(|f| -> Result<Request> {
            microlens_host::eval::run::check_tokens(&model, &f.prompt)?;
            ensure!(
                (f.target as usize) < cfg.d_vocab_out,
                "target {} is out of range (d_vocab_out = {})",
                f.target,
                cfg.d_vocab_out
            );
            let subject = match (&subject_text, &args.subject) {
                (Some(range), _) => range.clone(),
                (None, Some(s)) => parse_range(s)?,
                (None, None) => 0..f.prompt.len().saturating_sub(1),
            };
            ensure!(
                subject.start < subject.end && subject.end <= f.prompt.len(),
                "the subject {}..{} must be a non-empty range inside the prompt {:?}",
                subject.start,
                subject.end,
                f.prompt
            );
            Ok(Request {
                fact: f.clone(),
                subject_last: subject.end - 1,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let opts = EditOptions {
        calibration: random_sequences(args.calibration, cfg.n_ctx, cfg.d_vocab, args.seed),
        ridge: args.ridge,
        lambda: args.lambda,
        value: ValueOptions::default(),
    };
    let (edited, layers) = if args.facts.is_some() {
        let range = match &args.layers {
            Some(s) => parse_range(s)?,
            None => 0..default_layer(cfg.n_layers) + 1,
        };
        ensure!(
            range.start < range.end && range.end <= cfg.n_layers,
            "--layers {}..{} must be a non-empty range of the model's {} layers",
            range.start,
            range.end,
            cfg.n_layers
        );
        let layers: Vec<usize> = range.collect();
        (memit(&model, &reqs, &layers, &opts)?, layers)
    } else {
        let layer = args.layer.unwrap_or(default_layer(cfg.n_layers));
        ensure!(
            layer < cfg.n_layers,
            "--layer {layer} is not below n_layers = {}",
            cfg.n_layers
        );
        (rome(&model, &reqs[0], layer, &opts)?, vec![layer])
    };
    let after = Model::from_bytes(&edited.blob)?;
    let unrelated: Vec<Vec<u32>> = match &args.unrelated {
        Some(path) => read_facts_file(path)?
            .into_iter()
            .map(|f| f.prompt)
            .filter(|p| {
                !reqs.iter().any(|r| {
                    p.len() > r.subject_last
                        && p[..=r.subject_last] == r.fact.prompt[..=r.subject_last]
                })
            })
            .collect(),
        None => random_sequences(256, facts[0].prompt.len(), cfg.d_vocab, args.seed ^ 0x5eed),
    };
    ensure!(!unrelated.is_empty(), "no unrelated prompts are left");
    check_sequences("--unrelated", unrelated.len(), cfg.n_ctx)?;
    let before: Vec<Recall> = facts
        .iter()
        .map(|f| recall(&model, f))
        .collect::<Result<_>>()?;
    let after_r: Vec<Recall> = facts
        .iter()
        .map(|f| recall(&after, f))
        .collect::<Result<_>>()?;
    let kl = mean_kl(&model, &after, &unrelated)?;
    let surv = survival(&model, &after, &facts, &unrelated, &dtypes, args.gptq)?;
    std::io::Write::write_all(pending.file(), &edited.blob)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    pending.commit()?;

    let mean = |r: &[Recall]| r.iter().map(|x| x.prob).sum::<f64>() / r.len() as f64;
    let top1 = |r: &[Recall]| r.iter().filter(|x| x.top1).count();
    if args.json {
        let per_dtype: Vec<_> = surv
            .iter()
            .map(|s| {
                json!({"dtype": s.dtype, "rounding": if args.gptq { "default" } else { "nearest" }, "target_prob": mean(&s.targets), "top1": top1(&s.targets),
                       "unrelated_mean_kl": s.unrelated_mean_kl})
            })
            .collect();
        let layer = if layers.len() == 1 {
            json!(layers[0])
        } else {
            json!(layers)
        };
        println!(
            "{}",
            json!({
                "target_prob_before": mean(&before), "target_prob_after": mean(&after_r),
                "unrelated_mean_kl": kl, "layer": layer, "facts": facts.len(),
                "top1_after": top1(&after_r), "searched_prob": edited.searched_prob, "unrelated_prompts": unrelated.len(),
                "dtypes": per_dtype,
            })
        );
    } else {
        let method = if args.facts.is_some() {
            "MEMIT"
        } else {
            "ROME"
        };
        println!(
            "{method}: {} fact(s) written into W_out of layer(s) {layers:?}",
            facts.len()
        );
        println!(
            "target probability: {:.4} before, {:.4} after (top-1 for {} of {})",
            mean(&before),
            mean(&after_r),
            top1(&after_r),
            facts.len()
        );
        println!(
            "unrelated prompts ({}): mean KL(before || after) {kl:.5}",
            unrelated.len()
        );
        for s in &surv {
            println!(
                "quantised to {}: target probability {:.4}, top-1 for {} of {}, unrelated KL {:.5}",
                s.dtype,
                mean(&s.targets),
                top1(&s.targets),
                facts.len(),
                s.unrelated_mean_kl
            );
        }
        println!("wrote {}", args.output.display());
    }
    Ok(())
}
