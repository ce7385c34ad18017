//! Keys: the MLP hidden activation (`blocks.L.mlp.hook_post`) at one position, and their second moment
//! `C = E[k k^T]` over calibration sequences.

use anyhow::{Context, Result};
use microlens::{HookKind, HookPoint, Hooks, Model};
use nalgebra::{DMatrix, DVector};

use crate::eval::run::run_with_hooks;

/// Records one kind of one layer at every position.
struct Recorder {
    kind: HookKind,
    layer: usize,
    acts: Vec<Vec<f32>>,
}

impl Hooks for Recorder {
    fn wants(&self, kind: HookKind) -> bool {
        kind == self.kind
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        if p.layer == self.layer {
            self.acts.push(act.to_vec());
        }
    }
}

/// The activation `kind` (a whole-vector point) of `layer` at every position of `tokens`.
pub fn activations(
    model: &Model<'_>,
    tokens: &[u32],
    kind: HookKind,
    layer: usize,
) -> Result<Vec<Vec<f32>>> {
    let mut rec = Recorder {
        kind,
        layer,
        acts: Vec::new(),
    };
    run_with_hooks(model, tokens, &mut rec)?;
    Ok(rec.acts)
}

/// `mlp.hook_post` of `layer` at every position of `tokens`.
pub fn keys_at(model: &Model<'_>, tokens: &[u32], layer: usize) -> Result<Vec<Vec<f32>>> {
    activations(model, tokens, HookKind::MlpPost, layer)
}

/// The key of `layer` at position `pos` of `prompt`.
pub fn key(model: &Model<'_>, prompt: &[u32], layer: usize, pos: usize) -> Result<DVector<f64>> {
    let keys = keys_at(model, prompt, layer)?;
    let k = keys.get(pos).context("key position outside the prompt")?;
    Ok(DVector::from_iterator(k.len(), k.iter().map(|&x| x as f64)))
}

/// `C = mean over every position of every sequence of k k^T` (`[d_mlp, d_mlp]`), plus `ridge * mean
/// diagonal * I` so that it is invertible.
pub fn second_moment(
    model: &Model<'_>,
    sequences: &[Vec<u32>],
    layer: usize,
    ridge: f64,
) -> Result<DMatrix<f64>> {
    let d = model.config().d_mlp.context("the model has no MLPs")?;
    let mut c = DMatrix::<f64>::zeros(d, d);
    let mut n = 0usize;
    for seq in sequences {
        for k in keys_at(model, seq, layer)? {
            let k = DVector::from_iterator(d, k.iter().map(|&x| x as f64));
            c.ger(1.0, &k, &k, 1.0);
            n += 1;
        }
    }
    c /= n.max(1) as f64;
    let scale = c.trace() / d as f64;
    for i in 0..d {
        c[(i, i)] += ridge * scale.max(f64::MIN_POSITIVE);
    }
    Ok(c)
}

/// `n` sequences of `len` uniform random tokens below `d_vocab` (ChaCha8 of `seed`): the default
/// calibration and unrelated sequences.
pub fn random_sequences(n: usize, len: usize, d_vocab: usize, seed: u64) -> Vec<Vec<u32>> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            (0..len)
                .map(|_| rng.random_range(0..d_vocab as u32))
                .collect()
        })
        .collect()
}
