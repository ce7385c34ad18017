//! TransformerLens files of a model: `<name>.safetensors` (state-dict names and shapes, f32) and
//! `<name>.json` (a `HookedTransformerConfig.to_dict()` that `HookedTransformerConfig.from_dict` accepts,
//! and that `microlens convert` reads). Written after training; read back to evaluate or test.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use candle_core::{Device, Tensor};
use safetensors::Dtype;
use serde_json::{json, Map, Value};

use microlens::{Normalization, Positional};

use super::model::{values, Model, ModelConfig};
use crate::import::state_dict::Tensor as StateTensor;
use crate::import::tl_config::{normalization_name, positional_name};
use crate::io::files::{read_text, TextKind};
use crate::io::output::atomic_write;
use crate::io::safetensors::to_safetensors_with;

/// The two files written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exported {
    /// `<dir>/<name>.safetensors`.
    pub weights: PathBuf,
    /// `<dir>/<name>.json`.
    pub config: PathBuf,
}

/// Writes the model's weights and config into `dir` (created if missing).
pub fn export(model: &Model, dir: &Path, name: &str, seed: u64) -> Result<Exported> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let weights = dir.join(format!("{name}.safetensors"));
    let config = dir.join(format!("{name}.json"));
    write_safetensors(model, &weights)?;
    let mut config_json = tl_config(&model.cfg, name, seed);
    if let Some(d_mlp) = model.d_mlp() {
        super::mlp::set_tl_config(
            &mut config_json,
            model.cfg.n_layers,
            model.cfg.d_model,
            d_mlp,
        );
    }
    let text = serde_json::to_string_pretty(&config_json)? + "\n";
    atomic_write(&config, text.as_bytes())?;
    Ok(Exported { weights, config })
}

/// Writes every parameter as little-endian f32 under its TransformerLens name.
pub fn write_safetensors(model: &Model, path: &Path) -> Result<()> {
    let tensors = model
        .named_vars()
        .iter()
        .map(|(n, v)| Ok((n.clone(), StateTensor::new(v.dims().to_vec(), values(v)?)?)))
        .collect::<Result<BTreeMap<_, _>>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    atomic_write(path, &to_safetensors_with(&tensors, Some(metadata))?)
}

/// The model's `HookedTransformerConfig` in the form of TransformerLens 2.x's `to_dict()`: the keys that
/// decide the maths or name the model, with the values `__post_init__` derives (`attn_scale`,
/// `initializer_range`, `n_params`). Keys that only newer 2.x releases know and `dtype` (a `torch.dtype`,
/// float32 by default) are left out, so every 2.x `from_dict` accepts the file; it has no MLP and no tokenizer.
pub fn tl_config(cfg: &ModelConfig, name: &str, seed: u64) -> Value {
    let normalization_type = match cfg.norm {
        Normalization::None => Value::Null,
        other => json!(normalization_name(other)),
    };
    let entries = [
        ("n_layers", json!(cfg.n_layers)),
        ("d_model", json!(cfg.d_model)),
        ("n_ctx", json!(cfg.n_ctx)),
        ("d_head", json!(cfg.d_head)),
        ("model_name", json!(name)),
        ("n_heads", json!(cfg.n_heads)),
        ("d_mlp", Value::Null),
        ("act_fn", Value::Null),
        ("d_vocab", json!(cfg.d_vocab)),
        ("d_vocab_out", json!(cfg.d_vocab)),
        ("eps", json!(cfg.eps)),
        ("use_attn_scale", json!(true)),
        ("attn_scale", json!(cfg.attn_scale())),
        ("scale_attn_by_inverse_layer_idx", json!(false)),
        ("original_architecture", Value::Null),
        ("tokenizer_name", Value::Null),
        ("normalization_type", normalization_type),
        ("final_rms", json!(false)),
        ("attention_dir", json!("causal")),
        ("attn_only", json!(true)),
        (
            "positional_embedding_type",
            json!(positional_name(cfg.positional)),
        ),
        ("parallel_attn_mlp", json!(false)),
        ("rotary_dim", Value::Null),
        ("init_mode", json!("gpt2")),
        (
            "initializer_range",
            json!(0.8 / (cfg.d_model as f64).sqrt()),
        ),
        ("seed", json!(seed)),
        (
            "n_params",
            json!(cfg.n_layers * cfg.d_model * cfg.d_head * cfg.n_heads * 4),
        ),
        ("device", json!("cpu")),
    ];
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<Map<_, _>>(),
    )
}

/// Reads an attention-only TransformerLens model (standard, shortformer or sinusoidal positions, no norm
/// or `"LN"`):
/// the config JSON and a safetensors state dict (buffers such as `attn.mask` are ignored).
pub fn load(weights: &Path, config: &Path) -> Result<Model> {
    let text = read_text(config, TextKind::Config)?;
    let cfg = model_config(&serde_json::from_str(&text)?)
        .with_context(|| format!("config {}", config.display()))?;
    let model = Model::new(cfg, &mut super::trainer::rng(0, 0))?; // every value is overwritten below
    let bytes = crate::io::files::read_checkpoint(weights)?;
    let st = safetensors::SafeTensors::deserialize(&bytes)?;
    for (name, var) in model.named_vars() {
        let view = st
            .tensor(&name)
            .with_context(|| format!("{} has no {name}", weights.display()))?;
        ensure!(
            view.dtype() == Dtype::F32,
            "{name} is {:?}, not F32",
            view.dtype()
        );
        ensure!(
            view.shape() == var.dims(),
            "{name} has shape {:?}, expected {:?}",
            view.shape(),
            var.dims()
        );
        let data: Vec<f32> = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        var.set(&Tensor::from_vec(data, view.shape(), &Device::Cpu)?)?;
    }
    Ok(model)
}

/// The model shape in a TransformerLens config dict (`n_heads`, `d_vocab` and `eps` required explicitly).
fn model_config(json: &Value) -> Result<ModelConfig> {
    let int = |k: &str| {
        json[k]
            .as_u64()
            .map(|v| v as usize)
            .with_context(|| format!("`{k}` missing or not an integer"))
    };
    ensure!(
        json["attn_only"].as_bool() == Some(true),
        "only attention-only models are supported"
    );
    let positional = match json["positional_embedding_type"]
        .as_str()
        .unwrap_or("standard")
    {
        "standard" => Positional::Standard,
        "shortformer" => Positional::Shortformer,
        "sinusoidal" => Positional::Sinusoidal,
        other => bail!("positional_embedding_type `{other}` is not supported"),
    };
    let norm = match json.get("normalization_type").map(|v| v.as_str()) {
        Some(None) => Normalization::None,
        Some(Some("LN")) | None => Normalization::LN,
        Some(Some(other)) => bail!("normalization_type `{other}` is not supported"),
    };
    let cfg = ModelConfig {
        n_layers: int("n_layers")?,
        d_model: int("d_model")?,
        n_heads: int("n_heads")?,
        d_head: int("d_head")?,
        d_vocab: int("d_vocab")?,
        n_ctx: int("n_ctx")?,
        positional,
        norm,
        eps: json["eps"].as_f64().context("`eps` missing")?,
    };
    let scale = json["attn_scale"].as_f64().unwrap_or(cfg.attn_scale());
    ensure!(
        (scale - cfg.attn_scale()).abs() < 1e-9,
        "attn_scale {scale} is not sqrt(d_head)"
    );
    Ok(cfg)
}
