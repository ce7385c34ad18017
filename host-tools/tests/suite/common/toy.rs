//! A hand-built 2-layer attention-only model whose weights implement an induction circuit by design: the
//! ground truth for the detectors, the composition scores and the ablation table.
//!
//! Residual stream (no norm, no biases), four one-hot subspaces: current token `tok` (`d_vocab` dims),
//! position `pos` (`n_ctx`), previous token `prev` (`d_vocab`), output `out` (`d_vocab`).
//! - L0H0, previous-token head: `q_i = λ e_i`, `k_j = e_{j+1}` from the position subspace, so position
//!   `i` attends to `i - 1`; its OV copies `tok` of the attended position into `prev`.
//! - L1H0, induction head: `q` reads `tok`, `k` reads `prev` (K-composition with L0H0), so a token attends
//!   to the position after its earlier occurrence; its OV copies that position's `tok` into `out`.
//! - `W_U` reads only `out`: the direct path and layer 0 alone predict nothing (uniform, `ln d_vocab`).
//! - L0H1 and L1H1 are small random distractors.
//!
//! A test fixture (and the `induction_toy` example's model), not part of the library.

#![allow(dead_code)] // each test and the example use a part of it

use anyhow::Result;
use microlens::analysis::Head;
use microlens::blob::{Activations, Processing};
use microlens::tensors::Catalogue;
use microlens::{Config, Normalization, TensorKind};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

use microlens_host::import::layout::{tl_shape, tl_to_blob};
use microlens_host::quantize::encode::f32_tensor;

/// Vocabulary of the toy model.
pub const TOY_VOCAB: usize = 12;
/// Context of the toy model.
pub const TOY_CTX: usize = 24;
/// The designed previous-token head.
pub const TOY_PREVIOUS_TOKEN_HEAD: Head = Head::new(0, 0);
/// The designed induction head.
pub const TOY_INDUCTION_HEAD: Head = Head::new(1, 0);

/// Attention logit of a designed match (scores are `λ` for the target key, 0 otherwise).
const LAMBDA: f32 = 20.0;
/// Logit the induction head gives its prediction.
const BETA: f32 = 10.0;
/// Standard deviation of the distractor heads' weights.
const DISTRACTOR: f32 = 0.05;

/// The toy model's config: 2 layers, 2 heads of `d_head = n_ctx`, no norm, standard positions.
pub fn toy_config() -> Config {
    let (v, p) = (TOY_VOCAB, TOY_CTX);
    Config {
        normalization: Normalization::None,
        attn_scale: 1.0,
        ..Config::new(2, 3 * v + p, 2, p.max(v), v, p, None)
    }
}

/// The toy model as an `f32` blob.
pub fn induction_toy_model() -> Result<Vec<u8>> {
    let cfg = toy_config();
    let (v, p, d, dh, nh) = (TOY_VOCAB, TOY_CTX, cfg.d_model, cfg.d_head, cfg.n_heads);
    let (tok, pos, prev, out) = (0, v, v + p, 2 * v + p);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let normal = Normal::new(0.0, DISTRACTOR)?;
    let mut tensors = Vec::new();
    for id in Catalogue::new(&cfg).ids() {
        let shape = tl_shape(id.kind, &cfg);
        let mut t = vec![0.0f32; shape.iter().product()];
        // TL layouts: W_Q/W_K/W_V [head][d_model][d_head], W_O [head][d_head][d_model].
        let qkv = |h: usize, row: usize, col: usize| (h * d + row) * dh + col;
        let o = |h: usize, row: usize, col: usize| (h * dh + row) * d + col;
        let designed_head0 = matches!(
            id.kind,
            TensorKind::WQ | TensorKind::WK | TensorKind::WV | TensorKind::WO
        );
        match (id.kind, id.layer) {
            (TensorKind::WE, _) => (0..v).for_each(|t_| t[t_ * d + tok + t_] = 1.0),
            (TensorKind::WPos, _) => (0..p).for_each(|i| t[i * d + pos + i] = 1.0),
            (TensorKind::WU, _) => (0..v).for_each(|t_| t[(out + t_) * v + t_] = 1.0),
            (TensorKind::WQ, 0) => (0..p).for_each(|i| t[qkv(0, pos + i, i)] = LAMBDA),
            (TensorKind::WK, 0) => (0..p - 1).for_each(|j| t[qkv(0, pos + j, j + 1)] = 1.0),
            (TensorKind::WV, _) => (0..v).for_each(|t_| t[qkv(0, tok + t_, t_)] = 1.0),
            (TensorKind::WO, 0) => (0..v).for_each(|t_| t[o(0, t_, prev + t_)] = 1.0),
            (TensorKind::WQ, 1) => (0..v).for_each(|t_| t[qkv(0, tok + t_, t_)] = LAMBDA),
            (TensorKind::WK, 1) => (0..v).for_each(|t_| t[qkv(0, prev + t_, t_)] = 1.0),
            (TensorKind::WO, 1) => (0..v).for_each(|t_| t[o(0, t_, out + t_)] = BETA),
            _ => {}
        }
        if designed_head0 {
            // Heads 1.. are distractors: small random weights.
            let per_head = t.len() / nh;
            t[per_head..]
                .iter_mut()
                .for_each(|x| *x = normal.sample(&mut rng));
        }
        let blob = tl_to_blob(id.kind, &cfg, &t);
        tensors.push(f32_tensor(id, id.shape(&cfg), &blob));
    }
    let processing = Processing::none(Normalization::None);
    Ok(microlens::blob::write(
        &cfg,
        processing,
        Activations::F32,
        &tensors,
    )?)
}
