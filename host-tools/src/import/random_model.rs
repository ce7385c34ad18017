//! Small random TransformerLens models: configs across every supported architecture, state dicts with
//! every parameter non-trivial (norm weights far from 1, norm biases, `b_V`, `b_O` non-zero), and the same
//! config as TL's JSON, to write checkpoints.

use std::path::Path;

use microlens::tensors::Catalogue;
use microlens::{ActFn, Config, Normalization, Positional, TensorKind};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

use crate::import::layout::tl_shape;
use crate::import::state_dict::{StateDict, Tensor};
pub use crate::import::tl_config::to_tl_json as tl_json;

/// Every positional scheme (rotary over part of the head).
pub const POSITIONALS: [Positional; 4] = [
    Positional::Standard,
    Positional::Shortformer,
    Positional::Sinusoidal,
    Positional::Rotary {
        dim: 4,
        base: 10000.0,
        adjacent_pairs: false,
    },
];

/// A 2-layer model: d_model 12, 3 heads of 6, vocab 11 (unembed 13), n_ctx 9, MLP 20 or none.
pub fn config(norm: Normalization, positional: Positional, mlp: bool) -> Config {
    let mut cfg = Config::new(2, 12, 3, 6, 11, 9, mlp.then_some(20));
    cfg.d_vocab_out = 13;
    cfg.normalization = norm;
    cfg.positional = positional;
    if mlp {
        cfg.act_fn = ActFn::GeluNew;
    }
    cfg
}

/// A random unprocessed TL state dict for `cfg`.
pub fn state_dict(cfg: &Config, seed: u64) -> StateDict {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Catalogue::new(cfg)
        .ids()
        .filter(|id| !matches!(id.kind, TensorKind::PosQ | TensorKind::PosK))
        .map(|id| {
            let shape = tl_shape(id.kind, cfg);
            let fan_in = if shape.len() >= 2 {
                shape[shape.len() - 2] as f32
            } else {
                1.0
            };
            let (mean, std) = match id.kind {
                // Without a norm nothing rescales the residual stream: keep it O(1) so that f32 rounding
                // stays comparable to the normed models'.
                TensorKind::WE | TensorKind::WPos if cfg.normalization == Normalization::None => {
                    (0.0, 0.4)
                }
                TensorKind::WE | TensorKind::WPos => (0.0, 0.8),
                TensorKind::WQ | TensorKind::WK => (0.0, 1.2 / fan_in.sqrt()),
                TensorKind::Ln1W | TensorKind::Ln2W | TensorKind::LnFinalW => (1.0, 0.3),
                TensorKind::Ln1B | TensorKind::Ln2B | TensorKind::LnFinalB => (0.0, 0.3),
                k if k.is_matrix() => (0.0, 1.0 / fan_in.sqrt()),
                _ => (0.0, 0.2),
            };
            let normal = Normal::new(mean, std).unwrap();
            let n = shape.iter().product();
            let data = (0..n).map(|_| normal.sample(&mut rng)).collect();
            (id.to_string(), Tensor { shape, data })
        })
        .collect()
}

/// Writes `sd` as a safetensors file (f32, TL names).
pub fn write_safetensors(sd: &StateDict, path: &Path) {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = sd
        .iter()
        .map(|(n, t)| {
            (
                n.to_string(),
                t.shape.clone(),
                t.data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            )
        })
        .collect();
    let views = bytes.iter().map(|(n, s, b)| {
        (
            n.clone(),
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b).unwrap(),
        )
    });
    safetensors::tensor::serialize_to_file(views, None, path).unwrap();
}

/// Writes `sd` and `cfg` as `model.safetensors` and `config.json` in `dir`; returns the checkpoint path.
pub fn write_checkpoint(
    sd: &StateDict,
    cfg_json: &serde_json::Value,
    dir: &Path,
) -> std::path::PathBuf {
    let path = dir.join("model.safetensors");
    write_safetensors(sd, &path);
    std::fs::write(dir.join("config.json"), cfg_json.to_string()).unwrap();
    path
}

/// Configuration and seed of `tests/fixtures/sinusoidal` (TransformerLens has no sinusoidal positions, so
/// this fixture comes from here, not from `gen_tl.py`).
fn sinusoidal_fixture() -> (Config, StateDict) {
    let cfg = config(Normalization::LN, Positional::Sinusoidal, true);
    let sd = state_dict(&cfg, 19);
    (cfg, sd)
}

/// `tests/fixtures/sinusoidal` is what [`sinusoidal_fixture`] writes (`MICROLENS_WRITE_FIXTURES=1`
/// rewrites it).
#[test]
fn the_sinusoidal_fixture_is_reproducible() {
    let (cfg, sd) = sinusoidal_fixture();
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/sinusoidal");
    let tmp = tempfile::tempdir().unwrap();
    let out = if std::env::var_os("MICROLENS_WRITE_FIXTURES").is_some() {
        std::fs::create_dir_all(&committed).unwrap();
        committed.clone()
    } else {
        tmp.path().to_path_buf()
    };
    write_checkpoint(&sd, &tl_json(&cfg), &out);
    for file in ["model.safetensors", "config.json"] {
        let (a, b) = (committed.join(file), out.join(file));
        assert_eq!(
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            "{file}"
        );
    }
}

/// The f32 blob of `state_dict(cfg, seed)`, unprocessed: the tests' model.
#[cfg(test)]
pub(crate) fn f32_blob(cfg: &Config, seed: u64) -> Vec<u8> {
    use crate::convert::fold::ProcessingOptions;
    use crate::quantize::encode::F32Encoder;
    let sd = state_dict(cfg, seed);
    crate::convert::convert_state_dict(sd, cfg, &ProcessingOptions::none(), &F32Encoder)
        .unwrap()
        .blob
}
