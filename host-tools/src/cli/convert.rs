//! `microlens convert`: a checkpoint (TL or HF GPT-2 safetensors, or a TL `.pth`) to a blob, with
//! TransformerLens's weight processing on by default.

use std::path::PathBuf;

use anyhow::{ensure, Result};
use microlens::blob::Processing;
use microlens::{Activations, DType, Normalization, Positional};

use microlens_host::convert::fold::ProcessingOptions;
use microlens_host::convert::{config_path, convert_into, inputs, with_kv, ConvertOptions};
use microlens_host::import::llama2c::is_llama2c;
use microlens_host::import::tl_config::normalization_name;
use microlens_host::quantize::calibration::{Source, DEFAULT_SEED, DEFAULT_SEQUENCES};
use microlens_host::quantize::{CalibrationInputs, GptqOptions, Rounding};
use microlens_host::text::hf::{for_checkpoint, with_record};
use microlens_host::text::TextTokenizer;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Checkpoint: safetensors (TransformerLens, HF GPT-2 or HF Llama names), a TransformerLens .pth state
    /// dict, or a llama2.c .bin (legacy, version 1 or 2; its config is in the file).
    pub checkpoint: PathBuf,
    /// Output blob (.mlb).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Config JSON (TransformerLens cfg.to_dict() or HF GPT-2 config.json); default: config.json beside
    /// the checkpoint.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The checkpoint's tokenizer (a HuggingFace tokenizer.json or llama2.c's tokenizer.bin), recorded in
    /// the blob by its hash [default: tokenizer.json, else tokenizer.bin, beside the checkpoint].
    #[arg(long, value_name = "FILE", conflicts_with = "no_tokenizer")]
    pub tokenizer: Option<PathBuf>,
    /// Record no tokenizer, even with a tokenizer.json beside the checkpoint.
    #[arg(long)]
    pub no_tokenizer: bool,
    /// Storage type of the matrices; i8, i8g and i4 run with int8 activations and KV cache (W8A8, W4A8).
    #[arg(long, value_enum, default_value_t = DTypeName::F32)]
    pub dtype: DTypeName,
    /// Activation arithmetic with i8/i8g/i4 matrices: i8 (per-token int8 inputs and queries, W8A8), i16
    /// (per-token int16 inputs and queries, W8A16, same kernel; both with the int8 KV cache), or f32
    /// (the weights' rounding alone) [default: i8; f32 for f32/f16 matrices].
    #[arg(long, value_enum)]
    pub activations: Option<ActivationsName>,
    /// Arithmetic: float (the activations of --activations), or integer: every step between the
    /// embedding and the logits in integers, with scales calibrated on the rounding's calibration
    /// sequences (--dtype i8 or i4; for cores without an FPU) [default: float].
    #[arg(long, value_enum, conflicts_with_all = ["activations", "kv"])]
    pub arith: Option<ArithName>,
    /// KV cache of a W8A16 model (--activations i16): i8 (one scale per position and head) or i16
    /// (twice its values' RAM, for attention patterns within 1/256 of float) [default: i8].
    #[arg(long, value_enum)]
    pub kv: Option<KvName>,
    /// Lookup tables (W_E, W_pos, pos_Q, pos_K) of a W8A16 model: i8, or f16 (rows read, not
    /// multiplied: their int8 error is up to half of the int8 weights' on the test models; more flash)
    /// [default: i8].
    #[arg(long, value_enum)]
    pub tables: Option<TablesName>,
    /// Do not fold the norms into the weights that read them.
    #[arg(long)]
    pub no_fold_ln: bool,
    /// Do not centre the writing weights over d_model.
    #[arg(long)]
    pub no_center_writing_weights: bool,
    /// Do not centre W_U and b_U over the vocabulary.
    #[arg(long)]
    pub no_center_unembed: bool,
    /// Do not fold b_V into b_O.
    #[arg(long)]
    pub no_fold_value_biases: bool,
    /// Rounding of f16/i8/i4 weights; gptq rounds against the inputs each matrix sees on calibration
    /// sequences [default: gptq for f16, i8 and i4].
    #[arg(long, value_enum)]
    pub rounding: Option<RoundingName>,
    /// GPTQ: number of random repeated-segment calibration sequences of n_ctx tokens [default: 256].
    #[arg(long)]
    pub calibration_sequences: Option<usize>,
    /// GPTQ: seed of the random calibration sequences [default: 1; fidelity evaluates on seed 0].
    #[arg(long)]
    pub calibration_seed: Option<u64>,
    /// GPTQ: calibrate on these sequences instead (one per line, comma-separated token ids).
    #[arg(long)]
    pub calibration_tokens: Option<PathBuf>,
    /// GPTQ: the inputs each matrix is rounded against; with quantized each bias also takes up the mean
    /// error left [default: quantized].
    #[arg(long, value_enum)]
    pub calibration_inputs: Option<CalibrationInputs>,
}

/// The values of `--dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DTypeName {
    /// 32-bit floats.
    F32,
    /// Half floats, computed in f32.
    F16,
    /// Symmetric int8, one scale per row.
    I8,
    /// Symmetric int4, one scale per group of 32 along a row.
    I4,
    /// Symmetric int8, one scale per group of 8 along a row (10 bits per weight; finer than i8).
    I8g,
}

impl From<DTypeName> for DType {
    fn from(name: DTypeName) -> Self {
        match name {
            DTypeName::F32 => DType::F32,
            DTypeName::F16 => DType::F16,
            DTypeName::I8 => DType::I8,
            DTypeName::I4 => DType::I4,
            DTypeName::I8g => DType::I8G,
        }
    }
}

/// The values of `--activations`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ActivationsName {
    /// 32-bit floats.
    F32,
    /// Per-token int8 (W8A8).
    I8,
    /// Per-token int16 (W8A16).
    I16,
}

/// The values of `--arith`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ArithName {
    /// Float arithmetic around the integer matmuls (`--activations`).
    Float,
    /// Integer-only arithmetic.
    Integer,
}

/// The values of `--kv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KvName {
    /// int8 values, one scale per position and head.
    I8,
    /// int16 values, one scale per position and head.
    I16,
}

/// The values of `--tables`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TablesName {
    /// Half floats.
    F16,
    /// Symmetric int8, one scale per row.
    I8,
    /// Symmetric int8, one scale per group of 8.
    I8g,
}

/// The `--activations` and `--kv` options as one [`Activations`] (`None`: the dtype's default).
fn activations(args: &Args) -> Result<Option<Activations>> {
    if args.arith == Some(ArithName::Integer) {
        return Ok(Some(Activations::Integer));
    }
    let asked = args.activations.map(|a| match a {
        ActivationsName::F32 => Activations::F32,
        ActivationsName::I8 => Activations::I8,
        ActivationsName::I16 => Activations::I16,
    });
    with_kv(asked, args.kv.map(|kv| kv == KvName::I16))
}

/// The values of `--rounding`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RoundingName {
    /// Each weight to its nearest representable value.
    Nearest,
    /// Error-compensating GPTQ against calibration inputs.
    Gptq,
}

/// The rounding the arguments ask for (`None`: the dtype's default), refusing calibration options
/// where nothing is calibrated.
fn rounding(args: &Args, dtype: DType) -> Result<Option<Rounding>> {
    let calibrated = args.calibration_sequences.is_some()
        || args.calibration_seed.is_some()
        || args.calibration_tokens.is_some()
        || args.calibration_inputs.is_some();
    let asked = args.rounding.map(|r| match r {
        RoundingName::Nearest => Rounding::Nearest,
        RoundingName::Gptq => Rounding::Gptq(GptqOptions::default()),
    });
    let rounding = asked
        .clone()
        .unwrap_or_else(|| Rounding::default_for(dtype));
    let Rounding::Gptq(mut opts) = rounding else {
        ensure!(
            !calibrated,
            "the --calibration-* options need --rounding gptq and --dtype f16, i8 or i4"
        );
        return Ok(asked);
    };
    ensure!(
        !calibrated || dtype != DType::F32,
        "the --calibration-* options need --dtype f16, i8 or i4"
    );
    ensure!(
        args.calibration_tokens.is_none()
            || (args.calibration_sequences.is_none() && args.calibration_seed.is_none()),
        "--calibration-tokens replaces --calibration-sequences and --calibration-seed"
    );
    opts.source = match &args.calibration_tokens {
        Some(path) => Source::File(path.clone()),
        None => Source::Random {
            sequences: args.calibration_sequences.unwrap_or(DEFAULT_SEQUENCES),
            seed: args.calibration_seed.unwrap_or(DEFAULT_SEED),
        },
    };
    opts.against = args.calibration_inputs.unwrap_or_default();
    Ok(Some(Rounding::Gptq(opts)))
}

/// One line per step: applied, turned off, or not applicable to this normalisation.
fn describe(p: &Processing, asked: &ProcessingOptions, after: Normalization) -> Vec<String> {
    let orig = normalization_name(p.original_normalization);
    let step = |name: &str, applied: bool, wanted: bool, detail: String| match (applied, wanted) {
        (true, _) => format!("  {name}: applied{detail}"),
        (false, false) => format!("  {name}: off"),
        (false, true) => format!("  {name}: not applicable ({orig})"),
    };
    vec![
        step(
            "fold_ln",
            p.fold_ln,
            asked.fold_ln,
            format!(" ({orig} -> {})", normalization_name(after)),
        ),
        step(
            "center_writing_weights",
            p.center_writing_weights,
            asked.center_writing_weights,
            String::new(),
        ),
        step(
            "center_unembed",
            p.center_unembed,
            asked.center_unembed,
            String::new(),
        ),
        step(
            "fold_value_biases",
            p.fold_value_biases,
            asked.fold_value_biases,
            String::new(),
        ),
    ]
}

/// Runs the command.
pub fn run(args: Args) -> Result<()> {
    let dtype = DType::from(args.dtype);
    let rounding = rounding(&args, dtype)?;
    let activations = activations(&args)?;
    let opts = ConvertOptions {
        config: args.config,
        dtype,
        rounding,
        activations,
        tables: args.tables.map(|t| match t {
            TablesName::F16 => DType::F16,
            TablesName::I8 => DType::I8,
            TablesName::I8g => DType::I8G,
        }),
        processing: ProcessingOptions {
            fold_ln: !args.no_fold_ln,
            center_writing_weights: !args.no_center_writing_weights,
            center_unembed: !args.no_center_unembed,
            fold_value_biases: !args.no_fold_value_biases,
        },
    };
    let activations = opts.activations()?;
    opts.plan()?;
    let config = config_path(&args.checkpoint, &opts);
    let tokenizer = match args.no_tokenizer {
        true => None,
        false => for_checkpoint(&args.checkpoint, args.tokenizer.as_deref(), &config)?,
    };
    let mut outputs = inputs(&args.checkpoint, &opts);
    if let Some((path, _)) = &tokenizer {
        outputs.input(path);
    }
    let mut loaded = None;
    let c = convert_into(outputs, &args.checkpoint, &args.output, &opts, |c| {
        if let Some((path, prepend_bos)) = &tokenizer {
            let t = TextTokenizer::load(path, c.config.d_vocab)?;
            c.blob = with_record(std::mem::take(&mut c.blob), t.record(*prepend_bos))?;
            loaded = Some((t, *prepend_bos));
        }
        Ok(())
    })?;
    println!(
        "wrote {}: {} parameters, {} bytes ({} matrices{}, {} activations), config from {}",
        args.output.display(),
        c.n_params,
        c.blob.len(),
        opts.dtype.name(),
        match opts.dtype {
            d if d.integer() => format!(" rounded {}", opts.rounding().name()),
            _ => String::new(),
        },
        activations.name(),
        match is_llama2c(&args.checkpoint) {
            true => "the llama2.c checkpoint".into(),
            false => config.display().to_string(),
        }
    );
    if let Some((t, prepend_bos)) = &loaded {
        println!(
            "tokenizer: {} (fnv1a64 {:016x}, BOS {}, default_prepend_bos {prepend_bos})",
            t.describe(),
            t.record(true).map_or(0, |r| r.fnv1a64),
            t.bos().map_or("none".to_string(), |b| b.to_string())
        );
    }
    if c.config.positional == Positional::Shortformer {
        println!("shortformer: W_pos enters through per-layer pos_Q/pos_K tables (from the unprocessed W_pos, W_Q, W_K)");
    }
    println!("processing:");
    describe(&c.processing, &opts.processing, c.config.normalization)
        .iter()
        .for_each(|l| println!("{l}"));
    Ok(())
}
