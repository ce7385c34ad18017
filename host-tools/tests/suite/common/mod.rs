//! Shared by the analysis tests: the TransformerLens fixtures (`tests/fixtures`) converted to blobs.

#![allow(dead_code)]

pub mod fidelity;

use std::path::PathBuf;

use microlens_host::convert::fold::ProcessingOptions;
use microlens_host::convert::{convert, ConvertOptions};
use serde_json::Value;

include!("../../../../tests/fixture_names.rs");

/// Fixtures with TransformerLens caches (all but `hf_gpt2`).
pub fn with_cache() -> impl Iterator<Item = &'static str> {
    FIXTURES
        .into_iter()
        .chain(LLAMA_FIXTURES)
        .filter(|&n| !n.starts_with("hf_"))
}

/// `tests/fixtures/<name>`.
pub fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// `expected.json` of a fixture.
pub fn expected(name: &str) -> Value {
    let path = dir(name).join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The fixture converted to an `f32` blob: with the processing TransformerLens applied to it
/// (`expected.processing`), or none.
pub fn blob(name: &str, processed: bool) -> Vec<u8> {
    let processing = if processed {
        let p = &expected(name)["processing"];
        let flag = |k: &str| p[k].as_bool().unwrap();
        ProcessingOptions {
            fold_ln: flag("fold_ln"),
            center_writing_weights: flag("center_writing_weights"),
            center_unembed: flag("center_unembed"),
            fold_value_biases: flag("fold_value_biases"),
        }
    } else {
        ProcessingOptions::none()
    };
    let opts = ConvertOptions {
        processing,
        ..ConvertOptions::default()
    };
    convert(&dir(name).join("model.safetensors"), &opts)
        .unwrap_or_else(|e| panic!("{name}: {e:#}"))
        .blob
}

/// A JSON array of numbers, flattened.
pub fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        Value::Number(n) => vec![n.as_f64().unwrap()],
        other => panic!("not a number array: {other}"),
    }
}
