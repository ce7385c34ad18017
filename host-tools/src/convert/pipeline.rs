//! Checkpoint -> blob: read the config and checkpoint, add shortformer tables, process the weights as
//! TransformerLens does, lay every tensor out for the blob, encode it and write the blob.

use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use microlens::blob::{Processing, TensorData};
use microlens::tensors::Catalogue;
use microlens::{Activations, Config, DType, Model, Positional, TensorId, TensorKind};

use crate::convert::fold::{process_weights, ProcessingOptions};
use crate::convert::shortformer;
use crate::import;
use crate::import::layout::{check_tl_shape, tl_to_blob};
use crate::import::llama2c;
use crate::import::state_dict::StateDict;
use crate::import::tl_config;
use crate::io::output::Outputs;
use crate::quantize::calibration::Source;
use crate::quantize::encode::{default_activations, encode_tensor, F32Encoder, MatrixEncoder};
use crate::quantize::encoder_for;
use crate::quantize::{requantize_with, Plan, Rounding};

/// What `microlens convert` is asked to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertOptions {
    /// Config file; `None` means `config.json` beside the checkpoint.
    pub config: Option<PathBuf>,
    /// Storage type of the matrices.
    pub dtype: DType,
    /// Which TransformerLens processing steps to apply.
    pub processing: ProcessingOptions,
    /// How integer weights are rounded; `None`: [`Rounding::default_for`] the dtype.
    pub rounding: Option<Rounding>,
    /// Activation arithmetic; `None`: [`default_activations`] of the dtype. Integer matrices take
    /// int8 (W8A8) or int16 (W8A16) activations, float ones `f32`.
    pub activations: Option<Activations>,
    /// Storage type of the lookup tables (`W_E`, `W_pos`, `pos_Q`, `pos_K`) of a W8A16 model, `f16`
    /// or `i8`; `None`: as the other matrices ([`Plan::with_tables`]).
    pub tables: Option<DType>,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            config: None,
            dtype: DType::F32,
            processing: ProcessingOptions::default(),
            rounding: None,
            activations: None,
            tables: None,
        }
    }
}

/// A finished conversion.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversion {
    /// The blob bytes.
    pub blob: Vec<u8>,
    /// The config of the computation in the blob (post-folding normalisation).
    pub config: Config,
    /// What processing was applied.
    pub processing: Processing,
    /// Number of parameters stored (excluding the derived shortformer `pos_Q`/`pos_K` tables).
    pub n_params: usize,
}

/// The config file a conversion reads: `opts.config`, else `config.json` beside the checkpoint, else
/// `<stem>.json` beside it (what `train-induction` writes).
pub fn config_path(checkpoint: &Path, opts: &ConvertOptions) -> PathBuf {
    if let Some(c) = &opts.config {
        return c.clone();
    }
    let beside = checkpoint.with_file_name("config.json");
    let stem = checkpoint.with_extension("json");
    if !beside.exists() && stem.exists() {
        stem
    } else {
        beside
    }
}

impl ConvertOptions {
    /// The activation arithmetic asked for, or the dtype's default; an error for integer activations
    /// with float matrices (integer matrices with `f32` activations are the weights' error alone).
    pub fn activations(&self) -> Result<Activations> {
        let default = default_activations(self.dtype);
        let asked = self.activations.unwrap_or(default);
        ensure!(
            asked != Activations::Integer || matches!(self.dtype, DType::I8 | DType::I4),
            "--arith integer needs --dtype i8 or i4, not {}",
            self.dtype.name()
        );
        ensure!(
            !asked.integer() || default.integer(),
            "{} activations need i8 or i4 matrices, not {}",
            asked.name(),
            self.dtype.name()
        );
        Ok(asked)
    }

    /// How the matrices are stored and rounded: the dtype's, with the lookup tables asked for.
    pub fn plan(&self) -> Result<Plan> {
        Plan::with_tables(self.dtype, self.activations()?, self.tables)
    }

    /// The rounding asked for, or the dtype's default.
    pub fn rounding(&self) -> Rounding {
        self.rounding
            .clone()
            .unwrap_or_else(|| Rounding::default_for(self.dtype))
    }
}

/// The activation arithmetic of `--activations` (`asked`) and `--kv` (`kv_i16`: an int16 KV cache or
/// an int8 one), `None` for the dtype's default; a KV cache needs `i16` activations.
pub fn with_kv(asked: Option<Activations>, kv_i16: Option<bool>) -> Result<Option<Activations>> {
    Ok(match (asked, kv_i16) {
        (asked, None) | (asked @ Some(Activations::I16), Some(false)) => asked,
        (Some(Activations::I16), Some(true)) => Some(Activations::I16Kv16),
        (_, Some(_)) => anyhow::bail!("--kv needs --activations i16"),
    })
}

/// Converts a checkpoint file to blob bytes (nothing is written). GPTQ rounding converts to `f32` first,
/// calibrates on that model and re-encodes its matrices.
pub fn convert(checkpoint: &Path, opts: &ConvertOptions) -> Result<Conversion> {
    opts.plan()?;
    std::fs::metadata(checkpoint)
        .with_context(|| format!("cannot read checkpoint {}", checkpoint.display()))?;
    let (cfg, sd) = load(checkpoint, opts)?;
    convert_loaded(sd, &cfg, opts)
}

/// [`convert`] of a state dict already read (TL names and shapes, unprocessed) of `cfg`; `opts.config`
/// is not read.
pub fn convert_loaded(sd: StateDict, cfg: &Config, opts: &ConvertOptions) -> Result<Conversion> {
    let plan = opts.plan()?;
    let activations = opts.activations()?;
    if activations == Activations::Integer {
        return convert_integer(sd, cfg, opts);
    }
    let encoder = WithActivations {
        encoder: encoder_for(opts.dtype)?,
        tables: encoder_for(plan.tables)?,
        activations,
    };
    let encoder = &encoder;
    let rounding = opts.rounding();
    if rounding == Rounding::Nearest || opts.dtype == DType::F32 {
        return convert_state_dict(sd, cfg, &opts.processing, encoder);
    }
    let float = convert_state_dict(sd, cfg, &opts.processing, &F32Encoder)?;
    let model = Model::from_bytes(&float.blob).context("the written blob does not read back")?;
    let blob = requantize_with(&model, plan, encoder.activations(), &rounding)?;
    Model::from_bytes(&blob).context("the written blob does not read back")?;
    Ok(Conversion { blob, ..float })
}

/// [`convert_loaded`] for the integer-only arithmetic: the int8 blob computing in float (its weights
/// rounded as asked), then its plan from ranges calibrated on the rounding's calibration sequences.
fn convert_integer(sd: StateDict, cfg: &Config, opts: &ConvertOptions) -> Result<Conversion> {
    ensure!(
        opts.processing.fold_ln || !cfg.normalization.has_weight(),
        "--arith integer needs the norms folded (drop --no-fold-ln)"
    );
    let float = ConvertOptions {
        activations: Some(Activations::F32),
        ..opts.clone()
    };
    let mut c = convert_loaded(sd, cfg, &float)?;
    let model = Model::from_bytes(&c.blob).context("the written blob does not read back")?;
    let seqs = match opts.rounding() {
        Rounding::Gptq(g) => g.source.sequences(&model)?,
        Rounding::Nearest => Default::default(),
    };
    let seqs = match seqs.is_empty() {
        true => Source::default().sequences(&model)?,
        false => seqs,
    };
    c.blob = crate::quantize::integer::integer_blob(&c.blob, &seqs)?;
    Ok(c)
}

/// The config and TL state dict of a checkpoint: a llama2.c `.bin` holds its own config, any other
/// checkpoint is read with its config file.
fn load(checkpoint: &Path, opts: &ConvertOptions) -> Result<(Config, StateDict)> {
    let in_checkpoint = || format!("checkpoint {}", checkpoint.display());
    if llama2c::is_llama2c(checkpoint) {
        let m = llama2c::read_file(checkpoint)?;
        let sd = m
            .weights
            .into_state_dict(&m.config)
            .with_context(in_checkpoint)?;
        return Ok((m.config, sd));
    }
    let cfg = tl_config::load(&config_path(checkpoint, opts))?.config;
    let sd = import::load(checkpoint, &cfg).with_context(in_checkpoint)?;
    Ok((cfg, sd))
}

/// A matrix encoder with the lookup tables' encoder and the activation arithmetic the options ask for.
struct WithActivations {
    encoder: Box<dyn MatrixEncoder>,
    tables: Box<dyn MatrixEncoder>,
    activations: Activations,
}

impl MatrixEncoder for WithActivations {
    fn dtype(&self) -> DType {
        self.encoder.dtype()
    }
    fn encode(&self, id: TensorId, shape: [usize; 2], values: &[f32]) -> Result<TensorData> {
        match crate::quantize::tables::is_table(id.kind) {
            true => self.tables.encode(id, shape, values),
            false => self.encoder.encode(id, shape, values),
        }
    }
    fn activations(&self) -> Activations {
        self.activations
    }
}

/// Converts a TL state dict of `cfg` (unprocessed, TL names and shapes) to blob bytes.
pub fn convert_state_dict(
    mut sd: StateDict,
    cfg: &Config,
    processing: &ProcessingOptions,
    encoder: &dyn MatrixEncoder,
) -> Result<Conversion> {
    cfg.validate()?;
    import::validate(&sd, cfg)?;
    if cfg.positional == Positional::Shortformer {
        shortformer::add_positional_tables(&mut sd, cfg)?;
    }
    let (blob_cfg, processing) = process_weights(&mut sd, cfg, processing)?;
    let mut tensors = Vec::new();
    let mut n_params = 0;
    for id in Catalogue::new(&blob_cfg).ids() {
        let t = sd.get(&id.to_string())?;
        check_tl_shape(id, &blob_cfg, t)?;
        if !matches!(id.kind, TensorKind::PosQ | TensorKind::PosK) {
            n_params += t.data.len();
        }
        let blob = tl_to_blob(id.kind, &blob_cfg, &t.data);
        tensors.push(encode_tensor(encoder, id, id.shape(&blob_cfg), &blob)?);
    }
    let blob = microlens::blob::write(&blob_cfg, processing, encoder.activations(), &tensors)
        .context("cannot write the blob")?;
    Model::from_bytes(&blob).context("the written blob does not read back")?;
    Ok(Conversion {
        blob,
        config: blob_cfg,
        processing,
        n_params,
    })
}

/// The files a conversion reads: the checkpoint, its config (none for llama2.c) and GPTQ's
/// calibration token file.
pub fn inputs(checkpoint: &Path, opts: &ConvertOptions) -> Outputs {
    let mut outputs = Outputs::with_inputs([checkpoint]);
    if !llama2c::is_llama2c(checkpoint) {
        outputs.input(&config_path(checkpoint, opts));
    }
    if let Rounding::Gptq(gptq) = opts.rounding() {
        if let Source::File(tokens) = &gptq.source {
            outputs.input(tokens);
        }
    }
    outputs
}

/// [`convert`] into `out`, never one of the conversion's [`inputs`]: the output is reserved (checked,
/// its temporary file created) before the work and renamed into place after it; on any error or a
/// signal nothing is written.
pub fn convert_to_file(checkpoint: &Path, out: &Path, opts: &ConvertOptions) -> Result<Conversion> {
    convert_into(inputs(checkpoint, opts), checkpoint, out, opts, |_| Ok(()))
}

/// [`convert_to_file`] with the command's own `outputs` (its inputs registered) and `finish` applied
/// to the conversion before it is written (e.g. a tokenizer record added to the blob).
pub fn convert_into(
    outputs: Outputs,
    checkpoint: &Path,
    out: &Path,
    opts: &ConvertOptions,
    finish: impl FnOnce(&mut Conversion) -> Result<()>,
) -> Result<Conversion> {
    let mut pending = outputs.create(out)?;
    let mut conversion = convert(checkpoint, opts)?;
    finish(&mut conversion)?;
    std::io::Write::write_all(pending.file(), &conversion.blob)
        .with_context(|| format!("cannot write {}", out.display()))?;
    pending.commit()?;
    Ok(conversion)
}
