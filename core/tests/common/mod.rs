//! Random models for the core's own tests: every tensor a config needs, filled from a seeded LCG.
#![allow(dead_code)]

use microlens::blob::{self, Activations, Processing, TensorData};
use microlens::tensors::Catalogue;
use microlens::{Config, DType, Hooks, Model, Normalization, Session, TensorId};

/// A small deterministic generator (numbers in [-1, 1)).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next_u32(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    pub fn uniform(&mut self) -> f32 {
        self.next_u32() as f32 / (1u64 << 31) as f32 - 1.0
    }
}

/// An `f32` blob of `cfg` with random weights (norm weights around 1).
pub fn random_blob(cfg: &Config, seed: u64) -> Vec<u8> {
    random_blob_as(cfg, seed, DType::F32, Activations::F32)
}

/// Matrix `id` of `shape` (row-major `values`) encoded as `dtype`; vectors stay `f32`.
pub fn encode_matrix(id: TensorId, shape: [usize; 2], values: &[f32], dtype: DType) -> TensorData {
    let dtype = if id.kind.is_matrix() {
        dtype
    } else {
        DType::F32
    };
    TensorData::encode_nearest(id, shape, values, dtype).expect("encodable")
}

/// A blob of `cfg` with random weights (norm weights around 1), matrices stored as `dtype`.
pub fn random_blob_as(cfg: &Config, seed: u64, dtype: DType, activations: Activations) -> Vec<u8> {
    let mut rng = Lcg(seed);
    let tensors: Vec<TensorData> = Catalogue::new(cfg)
        .ids()
        .map(|id| {
            let shape = id.shape(cfg);
            let is_norm_w = matches!(
                id.kind,
                microlens::TensorKind::Ln1W
                    | microlens::TensorKind::Ln2W
                    | microlens::TensorKind::LnFinalW
            );
            let values: Vec<f32> = (0..shape[0] * shape[1])
                .map(|_| {
                    if is_norm_w {
                        1.0 + 0.3 * rng.uniform()
                    } else {
                        rng.uniform()
                    }
                })
                .collect();
            encode_matrix(id, shape, &values, dtype)
        })
        .collect();
    let processing = Processing::none(cfg.normalization);
    blob::write(cfg, processing, activations, &tensors).expect("valid random model")
}

/// A 2-layer LN model with a gelu MLP.
pub fn small_config() -> Config {
    let mut cfg = Config::new(2, 16, 2, 8, 23, 12, Some(32));
    cfg.normalization = Normalization::LN;
    cfg
}

/// Every position's logits of `tokens` through a fresh session with `hooks`.
pub fn run<H: Hooks>(model: &Model<'_>, tokens: &[u32], hooks: &mut H) -> Vec<Vec<f32>> {
    let (mut kv, mut ws) = (
        vec![0.0; model.kv_cache_len()],
        vec![0.0; model.workspace_len()],
    );
    let mut s = Session::new(model, &mut kv, &mut ws).unwrap();
    let mut out = vec![];
    s.run(tokens, hooks, |_, l| out.push(l.to_vec())).unwrap();
    out
}
