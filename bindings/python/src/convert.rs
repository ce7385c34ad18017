//! `microlens.convert`: `microlens convert`'s pipeline (`microlens_host::convert`) on a checkpoint file
//! or on a dict of arrays under TransformerLens (or HF GPT-2) names, with the command's options.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use microlens::{Activations, Config, DType};
use microlens_host::convert::fold::ProcessingOptions;
use microlens_host::convert::{config_path, convert_loaded, with_kv, ConvertOptions};
use microlens_host::import::state_dict::Tensor;
use microlens_host::import::{self, tl_config, RawTensor};
use microlens_host::text::hf::{for_checkpoint, with_record};
use microlens_host::text::TextTokenizer;
use numpy::PyReadonlyArrayDyn;
use pyo3::prelude::*;

use crate::errors::OrPy;
use crate::model::Model;

/// The value named `name` among `all`'s names.
fn named<T: Copy>(what: &str, name: &str, all: &[T], name_of: fn(T) -> &'static str) -> Result<T> {
    let names: Vec<&str> = all.iter().map(|&v| name_of(v)).collect();
    match all.iter().find(|&&v| name_of(v) == name) {
        Some(&v) => Ok(v),
        None => bail!("{what} {name:?} is not one of {}", names.join(", ")),
    }
}

/// Where the config comes from.
enum ConfigSource {
    /// A file (TransformerLens `cfg.to_dict()` or HF GPT-2 `config.json`).
    File(PathBuf),
    /// The same, already as JSON text.
    Json(String),
}

/// The config of `source`, parsed as `microlens convert` parses its file.
fn read_config(source: &ConfigSource) -> Result<Config> {
    match source {
        ConfigSource::File(path) => Ok(tl_config::load(path)?.config),
        ConfigSource::Json(text) => {
            let json: serde_json::Value =
                serde_json::from_str(text).context("the config is not valid JSON")?;
            Ok(tl_config::parse(&json).context("config")?.config)
        }
    }
}

/// A dict of `f32` arrays as the raw tensors of a checkpoint.
fn raw_tensors(
    arrays: Vec<(String, PyReadonlyArrayDyn<'_, f32>)>,
) -> Result<BTreeMap<String, RawTensor>> {
    arrays
        .into_iter()
        .map(|(name, a)| {
            let a = a.as_array();
            let t = Tensor::new(a.shape().to_vec(), a.iter().copied().collect())
                .with_context(|| format!("tensor {name}"))?;
            Ok((name, RawTensor::Float(t)))
        })
        .collect()
}

/// Blob bytes of a checkpoint file or a dict of arrays, converted as `microlens convert` converts
/// (with the tokenizer.json beside a checkpoint file recorded, as the command does by default).
#[pyfunction]
#[pyo3(signature = (checkpoint=None, tensors=None, config_file=None, config_json=None, dtype="f32",
    activations=None, kv=None, fold_ln=true, center_writing_weights=true, center_unembed=true,
    fold_value_biases=true))]
#[allow(clippy::too_many_arguments)]
pub fn convert(
    py: Python<'_>,
    checkpoint: Option<PathBuf>,
    tensors: Option<Vec<(String, PyReadonlyArrayDyn<'_, f32>)>>,
    config_file: Option<PathBuf>,
    config_json: Option<String>,
    dtype: &str,
    activations: Option<&str>,
    kv: Option<&str>,
    fold_ln: bool,
    center_writing_weights: bool,
    center_unembed: bool,
    fold_value_biases: bool,
) -> PyResult<Model> {
    let dtypes = [DType::F32, DType::F16, DType::I8, DType::I4, DType::I8G];
    let dtype = named("dtype", dtype, &dtypes, DType::name).or_py()?;
    let acts = [
        Activations::F32,
        Activations::I8,
        Activations::I16,
        Activations::Integer,
    ];
    let asked = activations
        .map(|a| named("activations", a, &acts, Activations::name))
        .transpose()
        .or_py()?;
    let kv_i16 = kv
        .map(|k| match k {
            "i8" => Ok(false),
            "i16" => Ok(true),
            other => Err(anyhow::anyhow!("kv {other:?} is not one of i8, i16")),
        })
        .transpose()
        .or_py()?;
    let opts = ConvertOptions {
        config: config_file.clone(),
        dtype,
        activations: with_kv(asked, kv_i16).or_py()?,
        processing: ProcessingOptions {
            fold_ln,
            center_writing_weights,
            center_unembed,
            fold_value_biases,
        },
        ..ConvertOptions::default()
    };
    let raw = tensors.map(raw_tensors).transpose().or_py()?;
    py.detach(|| {
        opts.plan()?;
        let source = match (config_json, &checkpoint) {
            (Some(json), _) => ConfigSource::Json(json),
            (None, Some(path)) => ConfigSource::File(config_path(path, &opts)),
            (None, None) => match config_file {
                Some(path) => ConfigSource::File(path),
                None => bail!("a checkpoint given as a dict needs its config (a path or a dict)"),
            },
        };
        let cfg = read_config(&source)?;
        let (sd, tokenizer) = match (raw, &checkpoint) {
            (Some(raw), _) => (import::state_dict(raw, &cfg)?, None),
            (None, Some(path)) => {
                std::fs::metadata(path)
                    .with_context(|| format!("cannot read checkpoint {}", path.display()))?;
                let sd = import::load(path, &cfg)
                    .with_context(|| format!("checkpoint {}", path.display()))?;
                let tokenizer = match &source {
                    ConfigSource::File(config) => for_checkpoint(path, None, config)?,
                    ConfigSource::Json(_) => None,
                };
                (sd, tokenizer)
            }
            (None, None) => bail!("no checkpoint given"),
        };
        let mut c = convert_loaded(sd, &cfg, &opts)?;
        if let Some((path, prepend_bos)) = &tokenizer {
            let t = TextTokenizer::load(path, c.config.d_vocab)?;
            c.blob = with_record(std::mem::take(&mut c.blob), t.record(*prepend_bos))?;
        }
        Model::new(c.blob)
    })
    .or_py()
}
