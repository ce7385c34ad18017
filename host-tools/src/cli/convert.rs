//! `microlens convert`: a checkpoint (TL or HF GPT-2 safetensors, or a TL `.pth`) to a blob, with
//! TransformerLens's weight processing on by default.

use std::path::PathBuf;

use anyhow::{bail, ensure, Result};
use microlens::blob::Processing;
use microlens::{Activations, DType, Normalization, Positional};

use microlens_host::convert::fold::ProcessingOptions;
use microlens_host::convert::{config_path, convert_to_file, ConvertOptions};
use microlens_host::import::tl_config::normalization_name;
use microlens_host::quantize::calibration::{Source, DEFAULT_SEED, DEFAULT_SEQUENCES};
use microlens_host::quantize::encode::{parse_activations, parse_dtype};
use microlens_host::quantize::{CalibrationInputs, GptqOptions, Rounding};

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Checkpoint: safetensors (TransformerLens or HF GPT-2 names) or a TransformerLens .pth state dict.
    pub checkpoint: PathBuf,
    /// Output blob (.mlb).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Config JSON (TransformerLens cfg.to_dict() or HF GPT-2 config.json); default: config.json beside
    /// the checkpoint.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Storage type of the matrices: f32, f16 (computed in f32), i8 (symmetric, one scale per row; int8
    /// activations and KV cache, W8A8) or i4 (symmetric, groups of 32 along each row; int8 activations).
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Activation arithmetic with i8/i4 matrices: i8 (per-token int8 inputs and queries, W8A8), i16
    /// (per-token int16 inputs and queries, W8A16, same kernel; both with the int8 KV cache), or f32
    /// (the weights' rounding alone) [default: i8; f32 for f32/f16 matrices].
    #[arg(long)]
    pub activations: Option<String>,
    /// KV cache of a W8A16 model (--activations i16): i8 (one scale per position and head) or i16
    /// (twice its values' RAM, for attention patterns within 1/256 of float) [default: i8].
    #[arg(long)]
    pub kv: Option<String>,
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
    /// Rounding of f16/i8/i4 weights: nearest, or gptq (error-compensating, against the inputs each
    /// matrix sees on calibration sequences run through the f32 model) [default: gptq for f16, i8 and i4].
    #[arg(long)]
    pub rounding: Option<String>,
    /// GPTQ: number of random repeated-segment calibration sequences of n_ctx tokens [default: 256].
    #[arg(long)]
    pub calibration_sequences: Option<usize>,
    /// GPTQ: seed of the random calibration sequences [default: 1; fidelity evaluates on seed 0].
    #[arg(long)]
    pub calibration_seed: Option<u64>,
    /// GPTQ: calibrate on these sequences instead (one per line, comma-separated token ids).
    #[arg(long)]
    pub calibration_tokens: Option<PathBuf>,
    /// GPTQ: round each matrix against the float model's inputs (float: plain GPTQ), or in forward order
    /// against the inputs of the model quantised so far, as the device multiplies them, compensating its
    /// errors, each bias taking up the mean error left (quantized) [default: quantized].
    #[arg(long)]
    pub calibration_inputs: Option<String>,
}

/// The rounding the arguments ask for (`None`: the dtype's default), refusing calibration options
/// where nothing is calibrated.
fn rounding(args: &Args, dtype: DType) -> Result<Option<Rounding>> {
    let calibrated = args.calibration_sequences.is_some()
        || args.calibration_seed.is_some()
        || args.calibration_tokens.is_some()
        || args.calibration_inputs.is_some();
    let asked = match args.rounding.as_deref() {
        None => None,
        Some("nearest") => Some(Rounding::Nearest),
        Some("gptq") => Some(Rounding::Gptq(GptqOptions::default())),
        Some(other) => bail!("unknown rounding {other:?} (nearest or gptq)"),
    };
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
    opts.against = match args.calibration_inputs.as_deref() {
        None => CalibrationInputs::default(),
        Some("float") => CalibrationInputs::Float,
        Some("quantized") => CalibrationInputs::Quantized,
        Some(other) => bail!("unknown calibration inputs {other:?} (float or quantized)"),
    };
    Ok(Some(Rounding::Gptq(opts)))
}

/// The `--activations` and `--kv` options as one [`Activations`] (`None`: the dtype's default).
fn activations(args: &Args) -> Result<Option<Activations>> {
    let asked = args
        .activations
        .as_deref()
        .map(parse_activations)
        .transpose()?;
    Ok(match (asked, args.kv.as_deref()) {
        (asked, None) => asked,
        (Some(Activations::I16), Some("i8")) => asked,
        (Some(Activations::I16), Some("i16")) => Some(Activations::I16Kv16),
        (_, Some(kv @ ("i8" | "i16"))) => bail!("--kv {kv} needs --activations i16"),
        (_, Some(other)) => bail!("unknown KV cache {other:?} (i8 or i16)"),
    })
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
    let dtype = parse_dtype(&args.dtype)?;
    let rounding = rounding(&args, dtype)?;
    let activations = activations(&args)?;
    let opts = ConvertOptions {
        config: args.config,
        dtype,
        rounding,
        activations,
        processing: ProcessingOptions {
            fold_ln: !args.no_fold_ln,
            center_writing_weights: !args.no_center_writing_weights,
            center_unembed: !args.no_center_unembed,
            fold_value_biases: !args.no_fold_value_biases,
        },
    };
    let activations = opts.activations()?;
    let config = config_path(&args.checkpoint, &opts);
    microlens_host::io::files::check_output(&args.output, &[&args.checkpoint, &config])?;
    let c = convert_to_file(&args.checkpoint, &args.output, &opts)?;
    println!(
        "wrote {}: {} parameters, {} bytes ({} matrices{}, {} activations), config from {}",
        args.output.display(),
        c.n_params,
        c.blob.len(),
        opts.dtype.name(),
        match opts.dtype {
            DType::I8 | DType::I4 => format!(" rounded {}", opts.rounding().name()),
            _ => String::new(),
        },
        activations.name(),
        config.display()
    );
    if c.config.positional == Positional::Shortformer {
        println!("shortformer: W_pos enters through per-layer pos_Q/pos_K tables (from the unprocessed W_pos, W_Q, W_K)");
    }
    println!("processing:");
    describe(&c.processing, &opts.processing, c.config.normalization)
        .iter()
        .for_each(|l| println!("{l}"));
    Ok(())
}
