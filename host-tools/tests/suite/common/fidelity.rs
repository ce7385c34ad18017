//! Shared by the fidelity tests and the research crate (`research/`): every model under test and
//! `microlens fidelity`'s measurement of it as each dtype, against limits.

use std::path::PathBuf;

use microlens::{DType, Model};
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::eval::sequences::induction_sequences;
use microlens_host::fidelity::{compare, Report};
use microlens_host::quantize::encode::default_activations;
use microlens_host::quantize::{requantize as requantize_blob, Rounding};

/// `reference` re-encoded as `dtype` as `microlens convert --dtype` does by default (GPTQ for f16/i8/i4).
pub fn requantize(reference: &Model<'_>, dtype: DType) -> Vec<u8> {
    let rounding = Rounding::default_for(dtype);
    requantize_blob(reference, dtype, default_activations(dtype), &rounding).unwrap()
}

/// The shipped induction model, converted to `f32`.
pub fn shipped() -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../firmware-example/model");
    let opts = ConvertOptions {
        config: Some(dir.join("induction-2l.json")),
        ..ConvertOptions::default()
    };
    convert(&dir.join("induction-2l.safetensors"), &opts)
        .unwrap()
        .blob
}

/// The first shipped induction model (`tests/fixtures/induction_2l_distinct`: trained on repeated
/// distinct-token segments, no norm), converted to `f32`.
pub fn first_shipped() -> Vec<u8> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/induction_2l_distinct");
    let opts = ConvertOptions {
        config: Some(dir.join("induction-2l.json")),
        ..ConvertOptions::default()
    };
    convert(&dir.join("induction-2l.safetensors"), &opts)
        .unwrap()
        .blob
}

/// Every model under test, as an `f32` blob.
pub fn models() -> Vec<(&'static str, Vec<u8>)> {
    let mut all: Vec<_> = super::FIXTURES
        .iter()
        .map(|&name| (name, super::blob(name, true)))
        .collect();
    all.push(("induction-2l", shipped()));
    all
}

/// `fidelity`'s default data for a model of `cfg`: 200 random induction sequences of `n_ctx` tokens,
/// seed 0.
pub fn evaluation_sequences(cfg: &microlens::Config) -> Vec<Vec<u32>> {
    induction_sequences(200, cfg.n_ctx, cfg.d_vocab, 0)
}

/// `fidelity reference.mlb <reference as dtype>` on the default sequences.
pub fn fidelity(reference: &[u8], dtype: DType) -> (Report, usize) {
    let reference = Model::from_bytes(reference).unwrap();
    let candidate = requantize(&reference, dtype);
    let bytes = candidate.len();
    let candidate = Model::from_bytes(&candidate).unwrap();
    let seqs = evaluation_sequences(reference.config());
    (
        compare(&reference, &candidate, &seqs, || {}).unwrap(),
        bytes,
    )
}

/// Largest mean KL, smallest top-1 agreement, largest attention difference and largest induction score
/// change a dtype may show; `mean_kl_by_model` overrides `mean_kl` for the models it names.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub mean_kl: f64,
    pub mean_kl_by_model: &'static [(&'static str, f64)],
    pub top1: f64,
    pub attention: f64,
    pub induction: f64,
}

/// Checks every model as `dtype` against `limits` (named `label`); returns the misses.
pub fn misses(
    models: &[(&str, Vec<u8>)],
    dtype: DType,
    limits: Limits,
    label: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, blob) in models {
        let (r, bytes) = fidelity(blob, dtype);
        let mean_kl_limit = limits
            .mean_kl_by_model
            .iter()
            .find(|(model, _)| model == name)
            .map_or(limits.mean_kl, |&(_, kl)| kl);
        let m = &r.model;
        println!(
            "{name:24} {:3} {bytes:>7} B: mean KL {:.2e} (max {:.2e}) top-1 {:.4} (repeated part {:.4}; \
             flips at reference margins <= {:.1e}) attention {:.2e} induction {:.1e}",
            dtype.name(),
            m.mean_kl,
            m.max_kl,
            m.top1_agreement,
            m.top1_agreement_repeated,
            m.top1_flip_max_margin,
            r.pattern_max_abs_diff,
            r.induction_score_max_change
        );
        let checks = [
            ("mean KL", m.mean_kl <= mean_kl_limit),
            ("top-1", m.top1_agreement >= limits.top1),
            ("attention", r.pattern_max_abs_diff <= limits.attention),
            (
                "induction",
                r.induction_score_max_change <= limits.induction,
            ),
        ];
        let missed = checks.iter().filter(|(_, ok)| !ok);
        out.extend(missed.map(|(what, _)| format!("{name} {} {what} ({label})", dtype.name())));
    }
    out
}

pub const NO_LIMIT: f64 = f64::INFINITY;
