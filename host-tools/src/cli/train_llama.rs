//! `microlens train-llama`: train a LLaMA-family story model (llama2.c's `stories260K` shape by
//! default) on generated English stories (and, with `--induction-share`, the induction task), with its
//! own BPE tokenizer, on the CPU; write it as TransformerLens safetensors + config JSON and llama2.c's `tokenizer.bin`.

use std::path::PathBuf;

use anyhow::{ensure, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::eval::generate::greedy;
use microlens_host::text::llama2c::{Llama2cTokenizer, BOS};
use microlens_host::train::budget::TrainingShape;
use microlens_host::train::data::{Draw, InductionData};
use microlens_host::train::llama::{Llama, LlamaConfig};
use microlens_host::train::llama_export::export;
use microlens_host::train::loss::{losses, Batch};
use microlens_host::train::model::ModelConfig;
use microlens_host::train::sequence::Sequence;
use microlens_host::train::token_stream::TokenStream;
use microlens_host::train::trainer::{optimise, rng, Schedule, StepReport};
use microlens_host::train::{bpe, stories};

/// Seed of the held-out stories, the same whatever the training seed.
const EVAL_SEED: u64 = 0x0570_91E5;
/// Stories the tokenizer learns its merges from (the first of the training stories).
const TOKENIZER_STORIES: usize = 2000;
/// Held-out windows the final loss is measured on.
const EVAL_WINDOWS: usize = 64;
/// The prompt of the sample printed at the end.
const PROMPT: &str = "Once upon a time, there was a little girl named Lily. ";

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output directory (created if missing).
    #[arg(short = 'o', long = "out")]
    pub out: PathBuf,
    /// File stem of the model's outputs (the tokenizer is `tokenizer.bin`).
    #[arg(long, default_value = "stories-260k")]
    pub name: String,
    /// Blocks.
    #[arg(long, default_value_t = 5)]
    pub layers: usize,
    /// Residual width.
    #[arg(long, default_value_t = 64)]
    pub d_model: usize,
    /// Query heads per block.
    #[arg(long, default_value_t = 8)]
    pub heads: usize,
    /// Key/value heads per block (grouped-query attention; divides --heads).
    #[arg(long, default_value_t = 4)]
    pub kv_heads: usize,
    /// Hidden width of the gated MLP.
    #[arg(long, default_value_t = 172)]
    pub d_mlp: usize,
    /// Vocabulary: the BPE tokenizer trained on the stories has this many tokens.
    #[arg(long, default_value_t = 512)]
    pub vocab: usize,
    /// Context length.
    #[arg(long, default_value_t = 128)]
    pub n_ctx: usize,
    /// Training stories generated (a few hundred bytes each).
    #[arg(long, default_value_t = 20000)]
    pub stories: usize,
    /// Optimiser steps (the induction warm-up's among them).
    #[arg(long, default_value_t = 5400)]
    pub steps: usize,
    /// Peak learning rate (AdamW; linear warm-up, cosine decay to a tenth).
    #[arg(long, default_value_t = 4e-3, allow_hyphen_values = true)]
    pub lr: f64,
    /// Windows per step.
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Sequences of every 8 that are the induction task (random tokens) instead of stories (0..=8),
    /// after the warm-up.
    #[arg(long, default_value_t = 2)]
    pub induction_share: usize,
    /// Steps at the start that train the induction task alone (within --steps), its tokens drawn from
    /// the first 64 tokens for the first half of them, then from an alphabet growing to the whole
    /// vocabulary (0: none).
    #[arg(long, default_value_t = 3000)]
    pub induction_warmup: usize,
    /// Length of the warm-up's sequences, at most --n-ctx [default: 64 or --n-ctx if shorter]. Shorter
    /// is cheaper, and rotary heads carry what they learn to the longer windows after it.
    #[arg(long)]
    pub warmup_ctx: Option<usize>,
    /// Seed of the stories, the initial weights and the windows drawn.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl Args {
    /// The model shape.
    fn model(&self) -> LlamaConfig {
        LlamaConfig {
            n_layers: self.layers,
            d_model: self.d_model,
            n_heads: self.heads,
            n_kv_heads: self.kv_heads,
            d_head: self.d_model / self.heads.max(1),
            d_mlp: self.d_mlp,
            d_vocab: self.vocab,
            n_ctx: self.n_ctx,
            rotary_base: 10000.0,
            eps: 1e-5,
        }
    }

    /// The induction warm-up's sequence length: `--warmup-ctx`, else [`WARMUP_CTX`] or the context if
    /// shorter.
    fn warmup_ctx(&self) -> usize {
        self.warmup_ctx.unwrap_or(WARMUP_CTX.min(self.n_ctx))
    }

    /// The optimiser's settings.
    fn schedule(&self) -> Schedule {
        Schedule {
            steps: self.steps,
            lr: self.lr,
            weight_decay: 0.01,
            warmup: (self.steps / 20).clamp(1, 100),
            final_lr_frac: 0.1,
        }
    }
}

/// Refuses arguments that cannot train, before anything is generated or allocated.
fn check(args: &Args) -> Result<()> {
    super::training_args::check_lr_and_out(args.lr, &args.out)?;
    ensure!(
        args.steps > 0 && args.batch > 0,
        "--steps and --batch must be positive"
    );
    ensure!(
        args.heads > 0 && args.d_model % args.heads == 0,
        "--heads {} must divide --d-model {}",
        args.heads,
        args.d_model
    );
    ensure!(
        args.induction_share <= 8 && args.induction_warmup <= args.steps,
        "--induction-share must be in 0..=8 and --induction-warmup at most --steps"
    );
    ensure!(
        args.warmup_ctx.is_none_or(|w| w <= args.n_ctx),
        "--warmup-ctx must be at most --n-ctx {}",
        args.n_ctx
    );
    // The induction task's sequences fit a repeated segment (checked before the corpus is generated).
    let tasks = [
        (args.induction_warmup > 0, args.warmup_ctx(), "--warmup-ctx"),
        (args.induction_share > 0, args.n_ctx, "--n-ctx"),
    ];
    for (_, n_ctx, flag) in tasks.iter().filter(|t| t.0) {
        InductionData::with_draw(*n_ctx, args.vocab, Draw::Replacement)
            .with_context(|| format!("{flag} {n_ctx} is too short for the induction task"))?;
    }
    ensure!(
        (1..=1_000_000).contains(&args.stories),
        "--stories must be in 1..=1000000, not {}",
        args.stories
    );
    let m = args.model();
    m.validate()?;
    let like = ModelConfig {
        n_layers: m.n_layers,
        d_model: m.d_model,
        n_heads: m.n_heads,
        d_head: m.d_head,
        d_vocab: m.d_vocab,
        n_ctx: m.n_ctx,
        positional: microlens::Positional::Standard,
        norm: microlens::Normalization::RMS,
        eps: m.eps,
    };
    TrainingShape {
        model: &like,
        d_mlp: m.d_mlp * 3 / 2,
        batch: args.batch,
        eval_size: EVAL_WINDOWS,
    }
    .check("--batch, --n-ctx, --d-model, --d-mlp, --heads or --layers")
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    check(&args)?;
    let cfg = args.model();
    let docs = stories::stories(args.seed, args.stories);
    let vocab = bpe::train(&docs[..docs.len().min(TOKENIZER_STORIES)], cfg.d_vocab)?;
    ensure!(
        vocab.pieces.len() == cfg.d_vocab,
        "--stories {}: the stories run out of pairs to merge at {} tokens, short of --vocab {}; use more stories or a smaller vocabulary",
        args.stories,
        vocab.pieces.len(),
        cfg.d_vocab
    );
    let tokenizer_bin = vocab.to_tokenizer_bin();
    let tokenizer =
        Llama2cTokenizer::from_bytes(&tokenizer_bin, cfg.d_vocab, &args.out.join("tokenizer.bin"))?;
    let train = TokenStream::new(&tokenizer, &docs)?;
    let held_out = TokenStream::new(&tokenizer, &stories::stories(EVAL_SEED, 500))?;
    println!(
        "corpus: {} stories, {} tokens ({:.2} bytes per token, vocabulary {})",
        docs.len(),
        train.tokens().len(),
        train.bytes_per_token(),
        cfg.d_vocab
    );
    let model = Llama::new(cfg, &mut rng(args.seed, 0))?;
    println!(
        "model: {} layers, d_model {}, {} heads x {} ({} key/value heads), d_mlp {}, vocab {}, n_ctx {}, {} params",
        cfg.n_layers,
        cfg.d_model,
        cfg.n_heads,
        cfg.d_head,
        cfg.n_kv_heads,
        cfg.d_mlp,
        cfg.d_vocab,
        cfg.n_ctx,
        cfg.n_params()
    );
    let schedule = args.schedule();
    let mut data_rng = rng(args.seed, 1);
    // The induction task over an alphabet of the first `alphabet` tokens: a random prefix + a repeated
    // segment of random length (a fixed distance back, as TransformerLens's `2 x n_ctx/2` test alone
    // has, is learnt by rotary heads as a positional copy instead of induction).
    let task = |rng: &mut _, n_ctx: usize, alphabet: usize| -> Result<Sequence> {
        Ok(InductionData::with_draw(n_ctx, alphabet, Draw::Replacement)?.sample(rng))
    };
    let warmup_ctx = args.warmup_ctx();
    // `--induction-warmup` steps of the task alone, its alphabet growing; then in every 8 sequences
    // `--induction-share` of it over the whole vocabulary, the others story windows.
    let (warmup, share) = (args.induction_warmup, args.induction_share);
    let (last, elapsed) = optimise(
        &model,
        &schedule,
        |step| {
            if step < warmup {
                let alphabet = warmup_alphabet(step, warmup, cfg.d_vocab);
                return (0..args.batch)
                    .map(|_| task(&mut data_rng, warmup_ctx, alphabet))
                    .collect();
            }
            let mut seqs = train.sample(&mut data_rng, cfg.n_ctx, args.batch)?;
            for (_, s) in seqs.iter_mut().enumerate().filter(|(k, _)| k % 8 < share) {
                *s = task(&mut data_rng, cfg.n_ctx, cfg.d_vocab)?;
            }
            Ok(seqs)
        },
        progress(schedule.steps),
    )?;
    let secs = elapsed.as_secs_f64();
    println!(
        "trained {} steps in {secs:.1} s ({:.1} ms/step), seed {}; last batch: loss {:.4}, \
         induction task's repeated part accuracy {:.1}%",
        schedule.steps,
        1e3 * secs / schedule.steps as f64,
        args.seed,
        last.loss,
        100.0 * last.acc_repeated
    );
    let windows = held_out.sample(&mut rng(EVAL_SEED, 1), cfg.n_ctx, EVAL_WINDOWS)?;
    let batch = Batch::new(&windows)?;
    let loss = losses(&model.forward(&batch.tokens)?, &batch)?.all;
    println!(
        "held-out stories ({EVAL_WINDOWS} windows of {}): loss {:.4}",
        cfg.n_ctx,
        loss.to_scalar::<f32>()?
    );
    let out = export(&model, &args.out, &args.name, args.seed, &tokenizer_bin)?;
    print_sample(&out.weights, &out.config, &tokenizer)?;
    for p in [&out.weights, &out.config, &out.tokenizer] {
        println!("wrote {}", p.display());
    }
    Ok(())
}

/// The induction warm-up's default sequence length.
const WARMUP_CTX: usize = 64;

/// The first alphabet of the induction warm-up: small enough that induction forms early.
const WARMUP_ALPHABET: usize = 64;

/// The induction task's alphabet at warm-up step `step` of `warmup`: [`WARMUP_ALPHABET`] tokens for
/// the first half, then growing linearly to the whole vocabulary at the last step.
fn warmup_alphabet(step: usize, warmup: usize, vocab: usize) -> usize {
    let first = WARMUP_ALPHABET.min(vocab);
    let (held, growing) = (warmup / 2, (warmup - warmup / 2).saturating_sub(1).max(1));
    (first + (vocab - first) * step.saturating_sub(held) / growing).min(vocab)
}

/// A greedy continuation of [`PROMPT`] through the core forward on the converted f32 blob.
fn print_sample(
    weights: &std::path::Path,
    config: &std::path::Path,
    tokenizer: &Llama2cTokenizer,
) -> Result<()> {
    let opts = ConvertOptions {
        config: Some(config.to_path_buf()),
        ..ConvertOptions::default()
    };
    let blob = convert(weights, &opts)?.blob;
    let model = microlens::Model::from_bytes(&blob)?;
    let mut prompt = vec![BOS];
    prompt.extend(tokenizer.encode(PROMPT.as_bytes())?.ids);
    let room = model.config().n_ctx + 1 - prompt.len().min(model.config().n_ctx);
    let new = greedy(&model, &prompt, room.min(64)).context("sampling the trained model")?;
    // The ids after BOS, decoded as llama2.c prints them after it (the dummy prefix's space dropped).
    let text = tokenizer.decode(&[&prompt[1..], new.as_slice()].concat())?;
    println!(
        "sample (core forward, f32, greedy):\n{}",
        String::from_utf8_lossy(&text).trim()
    );
    Ok(())
}

/// A progress bar with the smoothed loss (log lines when the bar is hidden).
fn progress(steps: usize) -> impl FnMut(&StepReport) {
    let bar = ProgressBar::new(steps as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:30} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}")
    {
        bar.set_style(style);
    }
    let mut smooth: Option<f64> = None;
    move |r: &StepReport| {
        let s = smooth.map_or(r.loss, |s| s + (r.loss - s) / 20.0);
        smooth = Some(s);
        let msg = format!("loss {s:.3}");
        if bar.is_hidden() && r.step % (steps / 20).max(1) == 0 {
            eprintln!("step {}/{steps}: {msg}", r.step);
        }
        bar.set_message(msg);
        bar.inc(1);
        if r.step == steps {
            bar.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::warmup_alphabet;

    #[test]
    fn the_warmup_alphabet_holds_then_grows_to_the_vocabulary() {
        let at = |step| warmup_alphabet(step, 800, 512);
        assert_eq!([at(0), at(399), at(400)], [64, 64, 64]);
        assert!(at(401) > 64 && at(600) < 512);
        assert!((400..799).all(|s| at(s) <= at(s + 1)));
        assert_eq!(at(799), 512);
        // A vocabulary under 64 tokens is the whole alphabet throughout; a warm-up of one step.
        assert_eq!(warmup_alphabet(3, 10, 40), 40);
        assert_eq!(warmup_alphabet(0, 1, 512), 64);
    }
}
