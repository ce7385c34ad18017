//! `microlens inspect`'s summary of a blob: its config in TransformerLens's vocabulary, processing,
//! tensors with their blob and TL shapes, flash and RAM, and the footprint as every dtype; as JSON or
//! text.

use std::collections::BTreeMap;

use anyhow::Result;
use microlens::blob::SCALE_BYTES;
use microlens::{Config, Model, Positional, TensorId, TensorKind};
use serde_json::json;

use crate::import::layout::tl_shape;
use crate::import::tl_config::{act_fn_name, normalization_name};
use crate::quantize::footprints;

/// An `f32` as a JSON number in its shortest exact decimal form (not the `f64` expansion).
fn f32_json(x: f32) -> serde_json::Value {
    x.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(serde_json::Value::Null, Into::into)
}

/// The config in TransformerLens's vocabulary.
pub fn config_json(cfg: &Config) -> serde_json::Value {
    let mut v = json!({
        "n_layers": cfg.n_layers, "d_model": cfg.d_model, "n_heads": cfg.n_heads, "d_head": cfg.d_head,
        "d_vocab": cfg.d_vocab, "d_vocab_out": cfg.d_vocab_out, "n_ctx": cfg.n_ctx, "d_mlp": cfg.d_mlp,
        "attn_only": cfg.attn_only(),
        "act_fn": cfg.d_mlp.map(|_| act_fn_name(cfg.act_fn)),
        "normalization_type": normalization_name(cfg.normalization),
        "attn_scale": f32_json(cfg.attn_scale),
        "scale_attn_by_inverse_layer_idx": cfg.scale_attn_by_inverse_layer_idx,
        "eps": f32_json(cfg.eps),
    });
    let pos = match cfg.positional {
        Positional::Standard => json!({"positional_embedding_type": "standard"}),
        Positional::Shortformer => json!({"positional_embedding_type": "shortformer"}),
        Positional::Sinusoidal => json!({"positional_embedding_type": "sinusoidal"}),
        Positional::Rotary {
            dim,
            base,
            adjacent_pairs,
        } => json!({
            "positional_embedding_type": "rotary", "rotary_dim": dim, "rotary_base": f32_json(base),
            "rotary_adjacent_pairs": adjacent_pairs,
        }),
    };
    if let (Some(v), serde_json::Value::Object(p)) = (v.as_object_mut(), pos) {
        v.extend(p);
    }
    v
}

/// Bytes of flash a sinusoidal model saves against a learned `W_pos [n_ctx, d_model]` stored as its `W_E`
/// is (its data and scales, as the `bytes` of `inspect`'s tensor list), `None` for other positional schemes.
pub fn sinusoidal_saving(model: &Model<'_>) -> Option<usize> {
    let cfg = model.config();
    if cfg.positional != Positional::Sinusoidal {
        return None;
    }
    let dtype = model.entry(TensorId::global(TensorKind::WE))?.dtype;
    let data = dtype.data_len(cfg.n_ctx, cfg.d_model)?;
    let scales = dtype.n_scales(cfg.n_ctx, cfg.d_model)? * SCALE_BYTES;
    Some(data + scales)
}

/// Everything `inspect` reports, as one JSON object.
pub fn summary(model: &Model<'_>) -> Result<serde_json::Value> {
    let cfg = model.config();
    let mut per_dtype: BTreeMap<&str, usize> = BTreeMap::new();
    let tensors: Vec<_> = model
        .entries()
        .map(|e| {
            let bytes = (e.len + e.scales_len) as usize;
            *per_dtype.entry(e.dtype.name()).or_default() += bytes;
            json!({
                "name": e.id().to_string(), "dtype": e.dtype.name(), "shape": [e.rows, e.cols],
                "tl_shape": tl_shape(e.kind, cfg), "bytes": bytes,
            })
        })
        .collect();
    let (ws, kv) = (4 * model.workspace_len(), 4 * model.kv_cache_len());
    let p = model.processing();
    Ok(json!({
        "config": config_json(cfg),
        "processing": {
            "fold_ln": p.fold_ln, "center_writing_weights": p.center_writing_weights,
            "center_unembed": p.center_unembed, "fold_value_biases": p.fold_value_biases,
            "original_normalization_type": normalization_name(p.original_normalization),
        },
        "activations": model.activations().name(),
        "tensors": tensors,
        "flash_bytes": model.blob_len(),
        "positions_flash_saved_bytes": sinusoidal_saving(model),
        "bytes_per_dtype": per_dtype,
        "ram_bytes": {"workspace": ws, "kv_cache": kv, "total": ws + kv},
        "as_dtype": footprints(model)?,
    }))
}

/// Prints the summary as text.
pub fn print_text(s: &serde_json::Value) {
    let line = |v: &serde_json::Value| {
        v.as_object().map_or(String::new(), |o| {
            o.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
    };
    println!("config: {}", line(&s["config"]));
    println!("processing: {}", line(&s["processing"]));
    println!("activations: {}", s["activations"].as_str().unwrap_or("?"));
    println!("tensors:");
    println!(
        "  {:<28} {:<5} {:>14} {:>16} {:>10}",
        "name", "dtype", "shape", "TL shape", "bytes"
    );
    for t in s["tensors"].as_array().into_iter().flatten() {
        println!(
            "  {:<28} {:<5} {:>14} {:>16} {:>10}",
            t["name"].as_str().unwrap_or("?"),
            t["dtype"].as_str().unwrap_or("?"),
            t["shape"].to_string(),
            t["tl_shape"].to_string(),
            t["bytes"]
        );
    }
    println!(
        "flash: {} bytes (bytes per dtype: {})",
        s["flash_bytes"],
        line(&s["bytes_per_dtype"])
    );
    if let Some(saved) = s["positions_flash_saved_bytes"].as_u64() {
        println!(
            "sinusoidal positions computed on the fly: no W_pos in flash, {saved} bytes saved"
        );
    }
    let ram = &s["ram_bytes"];
    println!(
        "RAM at full context: {} bytes (workspace {} + KV cache {})",
        ram["total"], ram["workspace"], ram["kv_cache"]
    );
    println!("the same model stored as each dtype:");
    for f in s["as_dtype"].as_array().into_iter().flatten() {
        println!(
            "  {:<3} (activations {:<3}): flash {:>9} bytes, RAM {:>8} bytes (workspace {} + KV cache {})",
            f["dtype"].as_str().unwrap_or("?"),
            f["activations"].as_str().unwrap_or("?"),
            f["flash_bytes"],
            f["workspace_bytes"].as_u64().unwrap_or(0) + f["kv_cache_bytes"].as_u64().unwrap_or(0),
            f["workspace_bytes"],
            f["kv_cache_bytes"]
        );
    }
}
