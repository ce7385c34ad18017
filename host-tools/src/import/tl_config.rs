//! Model configs from JSON: a TransformerLens `cfg.to_dict()` dump or an HF GPT-2 `config.json`, mapped to
//! a [`microlens::Config`] that describes the checkpoint as it is (before any weight processing).
//!
//! TransformerLens semantics: a missing key or `null` takes TL's default, except `normalization_type`,
//! where `null` is TL's explicit "no normalisation" and only a missing key means `"LN"`. Options the core
//! cannot compute are refused with one line naming the option.

use std::path::Path;

use anyhow::{bail, Context, Result};
use microlens::{ActFn, Config, Normalization, Positional};
use serde_json::{Map, Value};

/// Which schema a config file used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigFormat {
    /// `json.dump(model.cfg.to_dict(), f, default=str)` of a `HookedTransformerConfig`.
    TransformerLens,
    /// An HF `GPT2Config` `config.json`.
    HfGpt2,
}

/// A config read from a file: the architecture and the schema it came in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImportedConfig {
    /// The checkpoint's architecture (its original normalisation, before folding).
    pub config: Config,
    /// The schema of the file.
    pub format: ConfigFormat,
}

/// Reads and maps a config file (TL or HF GPT-2, detected from its keys).
pub fn load(path: &Path) -> Result<ImportedConfig> {
    let text = crate::io::files::read_text(path, crate::io::files::TextKind::Config)
        .context("cannot read config")?;
    let json: Value = serde_json::from_str(&text)
        .with_context(|| format!("config {} is not valid JSON", path.display()))?;
    parse(&json).with_context(|| format!("config {}", path.display()))
}

/// Maps a parsed config, detecting HF GPT-2 (`model_type == "gpt2"` or an `n_embd` key) versus TL.
pub fn parse(json: &Value) -> Result<ImportedConfig> {
    let obj = json
        .as_object()
        .context("the config is not a JSON object")?;
    let model_type = obj.get("model_type").and_then(Value::as_str);
    let (config, format) = if model_type == Some("gpt2") || obj.contains_key("n_embd") {
        (from_hf_gpt2(obj)?, ConfigFormat::HfGpt2)
    } else if let Some(other) = model_type {
        bail!("HF model_type `{other}` is not supported (only gpt2)");
    } else {
        (from_tl(obj)?, ConfigFormat::TransformerLens)
    };
    config.validate()?;
    Ok(ImportedConfig { config, format })
}

/// The value of `key` unless it is missing or `null`.
fn get<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// A number, also accepted as a numeric string (`default=str` writes numpy scalars that way).
fn number(obj: &Map<String, Value>, key: &str) -> Result<Option<f64>> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .ok()
            .with_context(|| format!("config option `{key}` is not a number: {s:?}")),
        Some(v) => bail!("config option `{key}` is not a number: {v}"),
    }
}

/// An integer; `-1` (TL's "derive it") reads as `None`.
fn integer(obj: &Map<String, Value>, key: &str) -> Result<Option<usize>> {
    match number(obj, key)? {
        None => Ok(None),
        Some(-1.0) => Ok(None),
        Some(x) if x >= 0.0 && x.fract() == 0.0 && x <= usize::MAX as f64 => Ok(Some(x as usize)),
        Some(x) => bail!("config option `{key}` is not a non-negative integer: {x}"),
    }
}

fn required(obj: &Map<String, Value>, key: &str) -> Result<usize> {
    integer(obj, key)?.with_context(|| format!("config option `{key}` is missing"))
}

fn flag(obj: &Map<String, Value>, key: &str, default: bool) -> Result<bool> {
    match get(obj, key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => bail!("config option `{key}` is not a boolean: {v}"),
    }
}

fn string<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>> {
    match get(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => bail!("config option `{key}` is not a string: {v}"),
    }
}

fn unsupported(option: &str, value: &Value, what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "config option `{option}: {value}` is not supported: microlens cannot compute {what}"
    )
}

/// TL's activation-function names (`utilities/activation_functions.py`) the core computes.
const ACT_FNS: [(&str, ActFn); 7] = [
    ("relu", ActFn::Relu),
    ("gelu", ActFn::Gelu),
    ("gelu_new", ActFn::GeluNew),
    ("gelu_fast", ActFn::GeluFast),
    ("gelu_pytorch_tanh", ActFn::GeluPytorchTanh),
    ("silu", ActFn::Silu),
    ("solu", ActFn::Solu),
];

/// TL's `normalization_type` strings (`None` is JSON `null`).
const NORMALIZATIONS: [(&str, Normalization); 5] = [
    ("LN", Normalization::LN),
    ("LNPre", Normalization::LNPre),
    ("RMS", Normalization::RMS),
    ("RMSPre", Normalization::RMSPre),
    ("None", Normalization::None),
];

/// Parses a TL `act_fn` name.
pub fn parse_act_fn(name: &str) -> Result<ActFn> {
    match ACT_FNS.iter().find(|(n, _)| *n == name) {
        Some((_, f)) => Ok(*f),
        None if name == "solu_ln" => bail!("config option `act_fn: \"solu_ln\"` is not supported: microlens cannot compute SoLU's LayerNorm over d_mlp"),
        None => bail!("config option `act_fn: {name:?}` is not supported: unknown activation function"),
    }
}

/// TL's name of an activation function.
pub fn act_fn_name(act: ActFn) -> &'static str {
    ACT_FNS
        .iter()
        .find(|(_, f)| *f == act)
        .map_or("?", |(n, _)| n)
}

/// TL's name of a normalisation (`"None"` for none).
pub fn normalization_name(norm: Normalization) -> &'static str {
    NORMALIZATIONS
        .iter()
        .find(|(_, n)| *n == norm)
        .map_or("?", |(s, _)| s)
}

/// TL's `positional_embedding_type` of a positional embedding.
pub fn positional_name(positional: Positional) -> &'static str {
    match positional {
        Positional::Standard => "standard",
        Positional::Shortformer => "shortformer",
        Positional::Rotary { .. } => "rotary",
        Positional::Sinusoidal => "sinusoidal",
    }
}

/// Options whose non-default values change the computation in ways the core cannot follow.
fn refuse_unsupported(obj: &Map<String, Value>) -> Result<()> {
    let flags = [
        ("gated_mlp", "gated MLPs"),
        ("parallel_attn_mlp", "parallel attention and MLP"),
        ("final_rms", "an RMSNorm ln_final in a LayerNorm model"),
        ("use_local_attn", "local (windowed) attention"),
        ("post_embedding_ln", "a LayerNorm after the embedding"),
        ("use_qk_norm", "query/key norms"),
        (
            "use_normalization_before_and_after",
            "norms after attention and MLP",
        ),
        ("use_NTK_by_parts_rope", "NTK-by-parts rotary scaling"),
        ("load_in_4bit", "4-bit bitsandbytes weights"),
    ];
    for (key, what) in flags {
        if flag(obj, key, false)? {
            return Err(unsupported(key, &Value::Bool(true), what));
        }
    }
    for (key, what) in [
        ("n_key_value_heads", "grouped-query attention"),
        ("num_experts", "mixture-of-experts MLPs"),
    ] {
        if let Some(v) = get(obj, key) {
            return Err(unsupported(key, v, what));
        }
    }
    for (key, what) in [
        ("attn_scores_soft_cap", "attention-score softcapping"),
        ("output_logits_soft_cap", "logit softcapping"),
    ] {
        if number(obj, key)?.is_some_and(|c| c > 0.0) {
            return Err(unsupported(key, &obj[key], what));
        }
    }
    if let Some(dir) = string(obj, "attention_dir")? {
        if dir != "causal" {
            return Err(unsupported(
                "attention_dir",
                &obj["attention_dir"],
                "non-causal attention",
            ));
        }
    }
    Ok(())
}

fn tl_normalization(obj: &Map<String, Value>) -> Result<Normalization> {
    match obj.get("normalization_type") {
        None => Ok(Normalization::LN),
        Some(Value::Null) => Ok(Normalization::None),
        Some(Value::String(s)) => match NORMALIZATIONS.iter().find(|(n, _)| n == s && *n != "None") {
            Some((_, norm)) => Ok(*norm),
            None => bail!("config option `normalization_type: {s:?}` is not supported (LN, LNPre, RMS, RMSPre or null)"),
        },
        Some(v) => bail!("config option `normalization_type` is not a string or null: {v}"),
    }
}

fn tl_positional(obj: &Map<String, Value>, d_head: usize) -> Result<Positional> {
    let kind = string(obj, "positional_embedding_type")?.unwrap_or("standard");
    Ok(match kind {
        "standard" => Positional::Standard,
        "shortformer" => Positional::Shortformer,
        "rotary" => Positional::Rotary {
            dim: integer(obj, "rotary_dim")?.unwrap_or(d_head),
            base: number(obj, "rotary_base")?.unwrap_or(10000.0) as f32,
            adjacent_pairs: flag(obj, "rotary_adjacent_pairs", false)?,
        },
        "sinusoidal" => Positional::Sinusoidal,
        "alibi" => return Err(unsupported("positional_embedding_type", &obj["positional_embedding_type"], "ALiBi")),
        other => bail!("config option `positional_embedding_type: {other:?}` is not supported (standard, shortformer, rotary, or this project's extension sinusoidal)"),
    })
}

/// Maps a TransformerLens `cfg.to_dict()` dump, deriving what `__post_init__` derives.
pub fn from_tl(obj: &Map<String, Value>) -> Result<Config> {
    refuse_unsupported(obj)?;
    let d_model = required(obj, "d_model")?;
    let d_head = required(obj, "d_head")?;
    if d_head == 0 {
        bail!("config option `d_head` must be positive");
    }
    let n_heads = integer(obj, "n_heads")?.unwrap_or(d_model / d_head);
    let d_vocab = integer(obj, "d_vocab")?
        .context("config option `d_vocab` must be set (TL's -1 means 'from the tokenizer')")?;
    let attn_only = flag(obj, "attn_only", false)?;
    let d_mlp = if attn_only {
        None
    } else {
        Some(integer(obj, "d_mlp")?.unwrap_or(4 * d_model))
    };
    let act_fn = match (attn_only, string(obj, "act_fn")?) {
        (true, _) => ActFn::Gelu,
        (false, Some(name)) => parse_act_fn(name)?,
        (false, None) => bail!("config option `act_fn` is missing (required unless attn_only)"),
    };
    let attn_scale = if flag(obj, "use_attn_scale", true)? {
        number(obj, "attn_scale")?
            .filter(|&s| s != -1.0)
            .unwrap_or((d_head as f64).sqrt())
    } else {
        1.0
    };
    Ok(Config {
        n_layers: required(obj, "n_layers")?,
        d_model,
        n_heads,
        d_head,
        d_vocab,
        d_vocab_out: integer(obj, "d_vocab_out")?.unwrap_or(d_vocab),
        n_ctx: required(obj, "n_ctx")?,
        d_mlp,
        act_fn,
        normalization: tl_normalization(obj)?,
        positional: tl_positional(obj, d_head)?,
        attn_scale: attn_scale as f32,
        scale_attn_by_inverse_layer_idx: flag(obj, "scale_attn_by_inverse_layer_idx", false)?,
        eps: number(obj, "eps")?.unwrap_or(1e-5) as f32,
    })
}

/// Maps an HF GPT-2 `config.json` as TL's `convert_hf_model_config` does (with `n_ctx = n_positions`).
pub fn from_hf_gpt2(obj: &Map<String, Value>) -> Result<Config> {
    let d_model = integer(obj, "n_embd")?.unwrap_or(768);
    let n_heads = integer(obj, "n_head")?.unwrap_or(12);
    if n_heads == 0 || d_model % n_heads != 0 {
        bail!("config option `n_embd` ({d_model}) is not a multiple of `n_head` ({n_heads})");
    }
    let n_ctx = match integer(obj, "n_positions")? {
        Some(n) => n,
        None => integer(obj, "n_ctx")?.unwrap_or(1024),
    };
    // HF divides scores by sqrt(d_head) only with `scale_attn_weights` (true in every released GPT-2).
    let attn_scale = if flag(obj, "scale_attn_weights", true)? {
        ((d_model / n_heads) as f64).sqrt()
    } else {
        1.0
    };
    let d_vocab = integer(obj, "vocab_size")?.unwrap_or(50257);
    Ok(Config {
        n_layers: integer(obj, "n_layer")?.unwrap_or(12),
        d_model,
        n_heads,
        d_head: d_model / n_heads,
        d_vocab,
        d_vocab_out: d_vocab,
        n_ctx,
        d_mlp: Some(integer(obj, "n_inner")?.unwrap_or(4 * d_model)),
        act_fn: parse_act_fn(string(obj, "activation_function")?.unwrap_or("gelu_new"))?,
        normalization: Normalization::LN,
        positional: Positional::Standard,
        attn_scale: attn_scale as f32,
        scale_attn_by_inverse_layer_idx: flag(obj, "scale_attn_by_inverse_layer_idx", false)?,
        eps: number(obj, "layer_norm_epsilon")?.unwrap_or(1e-5) as f32,
    })
}

/// `cfg` as TransformerLens's `cfg.to_dict()` JSON would have it.
pub fn to_tl_json(cfg: &Config) -> serde_json::Value {
    let norm = match cfg.normalization {
        Normalization::None => serde_json::Value::Null,
        n => normalization_name(n).into(),
    };
    let mut v = serde_json::json!({
        "n_layers": cfg.n_layers, "d_model": cfg.d_model, "n_ctx": cfg.n_ctx, "d_head": cfg.d_head,
        "n_heads": cfg.n_heads, "d_mlp": cfg.d_mlp, "d_vocab": cfg.d_vocab, "d_vocab_out": cfg.d_vocab_out,
        "act_fn": cfg.d_mlp.map(|_| act_fn_name(cfg.act_fn)), "attn_only": cfg.attn_only(),
        "normalization_type": norm, "eps": cfg.eps, "attn_scale": cfg.attn_scale as f64,
        "dtype": "torch.float32", "device": "cpu", "positional_embedding_type": "standard",
    });
    match cfg.positional {
        Positional::Standard => {}
        Positional::Shortformer => v["positional_embedding_type"] = "shortformer".into(),
        Positional::Sinusoidal => v["positional_embedding_type"] = "sinusoidal".into(),
        Positional::Rotary {
            dim,
            base,
            adjacent_pairs,
        } => {
            v["positional_embedding_type"] = "rotary".into();
            v["rotary_dim"] = dim.into();
            v["rotary_base"] = (base as f64).into();
            v["rotary_adjacent_pairs"] = adjacent_pairs.into();
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tl(extra: &str) -> Result<ImportedConfig> {
        let base = r#""n_layers": 2, "d_model": 32, "n_ctx": 16, "d_head": 8, "d_vocab": 64, "act_fn": "relu""#;
        parse(&serde_json::from_str(&format!("{{{base}{extra}}}"))?)
    }

    #[test]
    fn tl_defaults_and_sentinels() {
        let c = tl(r#", "n_heads": -1, "d_vocab_out": -1, "attn_scale": -1.0, "d_mlp": null"#)
            .unwrap()
            .config;
        assert_eq!((c.n_heads, c.d_vocab_out, c.d_mlp), (4, 64, Some(128)));
        assert_eq!(c.normalization, Normalization::LN);
        assert!((c.attn_scale - 8f32.sqrt()).abs() < 1e-7);
        let c = tl(r#", "normalization_type": null, "use_attn_scale": false"#)
            .unwrap()
            .config;
        assert_eq!((c.normalization, c.attn_scale), (Normalization::None, 1.0));
        let c = tl(r#", "positional_embedding_type": "rotary", "rotary_dim": null"#)
            .unwrap()
            .config;
        assert_eq!(
            c.positional,
            Positional::Rotary {
                dim: 8,
                base: 10000.0,
                adjacent_pairs: false
            }
        );
        let c = tl(r#", "attn_only": true, "d_mlp": 64, "act_fn": null, "attn_scale": "2.5""#)
            .unwrap()
            .config;
        assert_eq!((c.d_mlp, c.attn_scale), (None, 2.5));
    }

    #[test]
    fn tl_refusals_name_the_option() {
        for (extra, option) in [
            (r#", "gated_mlp": true"#, "gated_mlp"),
            (r#", "n_key_value_heads": 2"#, "n_key_value_heads"),
            (r#", "attn_scores_soft_cap": 50.0"#, "attn_scores_soft_cap"),
            (r#", "attention_dir": "bidirectional""#, "attention_dir"),
            (r#", "act_fn": "xielu""#, "act_fn"),
            (r#", "act_fn": "solu_ln""#, "act_fn"),
            (
                r#", "positional_embedding_type": "alibi""#,
                "positional_embedding_type",
            ),
            (
                r#", "normalization_type": "BatchNorm""#,
                "normalization_type",
            ),
        ] {
            let err = format!("{:#}", tl(extra).unwrap_err());
            assert!(err.contains(option), "{extra}: {err}");
        }
    }

    #[test]
    fn hf_gpt2_mapping() {
        let json = r#"{"model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 24,
            "n_ctx": 24, "vocab_size": 64, "n_inner": null, "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-5, "scale_attn_by_inverse_layer_idx": true}"#;
        let imported = parse(&serde_json::from_str(json).unwrap()).unwrap();
        let c = imported.config;
        assert_eq!(imported.format, ConfigFormat::HfGpt2);
        assert_eq!(
            (c.d_head, c.d_mlp, c.n_ctx, c.act_fn),
            (8, Some(128), 24, ActFn::GeluNew)
        );
        assert!(c.scale_attn_by_inverse_layer_idx);
    }
}
