//! Causal tracing (ROME's causal mediation analysis, Meng et al. 2022): corrupt the subject tokens'
//! embeddings with Gaussian noise, then restore one activation at a time from the clean run and measure
//! how much of the clean answer's probability comes back.
//!
//! The corruption is added to `blocks.0.hook_resid_pre` (`hook_embed + hook_pos_embed`, ROME's embedding
//! output) at the subject positions, `x += sigma * N(0, 1)` per coordinate, with one noise draw per
//! sample; `sigma` defaults to 3 x the standard deviation of `W_E`'s entries (ROME: 3 x the embeddings'
//! std). Restored, one at a time, in the corrupted run: the residual stream after each layer
//! (`hook_resid_post`, ROME's hidden states), the MLP output (`hook_mlp_out`) and the attention output
//! (`hook_attn_out`) at each layer and position. Every run is the core's forward with hooks.

use anyhow::{bail, ensure, Context, Result};
use microlens::{HookKind, HookKinds, HookPoint, Hooks, Model, TensorId, TensorKind};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;

use crate::eval::cache::ActivationCache;
use crate::eval::metrics::log_softmax;
use crate::eval::run::{check_words, run_with_hooks};

/// The three restored activations, in table order.
pub const TRACED: [HookKind; 3] = [HookKind::ResidPost, HookKind::MlpOut, HookKind::AttnOut];

/// What a trace is asked to do.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceOptions {
    /// Subject positions `start..end` of the prompt.
    pub subject: std::ops::Range<usize>,
    /// Noise standard deviation; `None`: 3 x the std of `W_E`'s entries.
    pub noise: Option<f64>,
    /// Noise draws averaged.
    pub samples: usize,
    /// Seed of the noise.
    pub seed: u64,
}

/// The result: probabilities of the clean answer at the last position.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Trace {
    /// The clean run's top token at the last position.
    pub answer: u32,
    /// Its probability in the clean run.
    pub clean: f64,
    /// Its mean probability in the corrupted runs.
    pub corrupted: f64,
    /// The noise standard deviation used.
    pub noise: f64,
    /// `[kind][layer][pos]` (kinds as [`TRACED`]): mean probability with that activation restored.
    pub restored: Vec<Vec<Vec<f64>>>,
}

impl Trace {
    /// `[layer][pos]` indirect effects of `kind`: restored probability minus the corrupted one.
    pub fn indirect_effect(&self, kind: HookKind) -> Vec<Vec<f64>> {
        let k = TRACED.iter().position(|&t| t == kind).unwrap_or(0);
        self.restored[k]
            .iter()
            .map(|row| row.iter().map(|p| p - self.corrupted).collect())
            .collect()
    }

    /// The `(layer, pos)` with the largest indirect effect of `kind`.
    pub fn argmax(&self, kind: HookKind) -> (usize, usize) {
        let ie = self.indirect_effect(kind);
        let mut best = (0, 0, f64::NEG_INFINITY);
        for (l, row) in ie.iter().enumerate() {
            for (p, &x) in row.iter().enumerate() {
                if x > best.2 {
                    best = (l, p, x);
                }
            }
        }
        (best.0, best.1)
    }
}

/// Adds fixed noise to `blocks.0.hook_resid_pre` at the subject positions.
struct Corrupt<'a> {
    noise: &'a [Vec<f32>],
    start: usize,
}

impl Hooks for Corrupt<'_> {
    fn wants(&self, kind: HookKind) -> bool {
        kind == HookKind::ResidPre
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        if p.layer == 0 && p.pos >= self.start {
            if let Some(n) = self.noise.get(p.pos - self.start) {
                act.iter_mut().zip(n).for_each(|(a, n)| *a += n);
            }
        }
    }
}

/// Writes the clean activation of one `(kind, layer, pos)` back.
struct Restore<'a> {
    clean: &'a ActivationCache,
    point: Option<HookPoint>,
}

impl Hooks for Restore<'_> {
    fn wants(&self, kind: HookKind) -> bool {
        self.point.is_some_and(|p| p.kind == kind)
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        if Some(p) == self.point {
            if let Some(clean) = self.clean.get(&p) {
                act.copy_from_slice(clean);
            }
        }
    }
}

/// 3 x the standard deviation of the token embedding's entries.
pub fn default_noise(model: &Model<'_>) -> Result<f64> {
    let w_e = crate::import::layout::tl_tensor(model, TensorId::global(TensorKind::WE))
        .context("the model has no W_E")?;
    let n = w_e.data.len() as f64;
    let mean = w_e.data.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = w_e
        .data
        .iter()
        .map(|&x| (x as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    Ok(3.0 * var.sqrt())
}

/// Probability of `token` at the last position of `logits`.
fn last_prob(logits: &[Vec<f32>], token: u32) -> f64 {
    logits
        .last()
        .map_or(0.0, |l| log_softmax(l)[token as usize].exp())
}

/// Traces `prompt` as [`TraceOptions`] says.
pub fn causal_trace(model: &Model<'_>, prompt: &[u32], opts: &TraceOptions) -> Result<Trace> {
    let cfg = model.config();
    let (start, end) = (opts.subject.start, opts.subject.end);
    ensure!(
        start < end && end <= prompt.len(),
        "the subject {start}..{end} must be a non-empty range inside the prompt's {} positions",
        prompt.len()
    );
    ensure!(opts.samples > 0, "--samples must be at least 1");
    ensure!(
        cfg.d_mlp.is_some(),
        "the model has no MLPs: causal tracing here restores MLP outputs"
    );
    let noise = match opts.noise {
        Some(s) if s.is_finite() && s >= 0.0 => s,
        Some(s) => bail!("--noise must be a finite non-negative number, not {s}"),
        None => default_noise(model)?,
    };
    check_words(
        &[opts.samples, end - start, cfg.d_model],
        &format!("--samples {} of noise over the subject", opts.samples),
    )?;
    let kinds = HookKinds::of(&TRACED);
    let (clean_cache, clean_logits) = ActivationCache::record(model, prompt, kinds)?;
    let last = clean_logits.last().context("empty prompt")?;
    let answer = crate::eval::metrics::argmax(last) as u32;
    let draws: Vec<Vec<Vec<f32>>> = (0..opts.samples)
        .map(|s| {
            let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
            rng.set_stream(s as u64);
            (start..end)
                .map(|_| {
                    (0..cfg.d_model)
                        .map(|_| {
                            let z: f64 = StandardNormal.sample(&mut rng);
                            (noise * z) as f32
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let too_loud = || {
        anyhow::anyhow!(
            "--noise {noise:e} drives the corrupted run out of f32 range (the clean run is finite): use \
             a smaller --noise"
        )
    };
    if draws.iter().flatten().flatten().any(|x| !x.is_finite()) {
        return Err(too_loud());
    }
    let (n_layers, n_pos) = (cfg.n_layers, prompt.len());
    // One sample: the corrupted probability, then [kind][layer][pos] restored.
    let per_sample = draws
        .par_iter()
        .map(|noise| -> Result<(f64, Vec<f64>)> {
            let run = |point: Option<HookPoint>| -> Result<f64> {
                let mut hooks = (
                    Corrupt { noise, start },
                    Restore {
                        clean: &clean_cache,
                        point,
                    },
                );
                let logits = run_with_hooks(model, prompt, &mut hooks).map_err(|_| too_loud())?;
                Ok(last_prob(&logits, answer))
            };
            let corrupted = run(None)?;
            let mut restored = Vec::with_capacity(TRACED.len() * n_layers * n_pos);
            for kind in TRACED {
                for layer in 0..n_layers {
                    for pos in 0..n_pos {
                        restored.push(run(Some(HookPoint {
                            kind,
                            layer,
                            head: 0,
                            pos,
                        }))?);
                    }
                }
            }
            Ok((corrupted, restored))
        })
        .collect::<Result<Vec<_>>>()?;
    let n = opts.samples as f64;
    let corrupted = per_sample.iter().map(|s| s.0).sum::<f64>() / n;
    let mean = |i: usize| per_sample.iter().map(|s| s.1[i]).sum::<f64>() / n;
    let restored = (0..TRACED.len())
        .map(|k| {
            (0..n_layers)
                .map(|l| {
                    (0..n_pos)
                        .map(|p| mean((k * n_layers + l) * n_pos + p))
                        .collect()
                })
                .collect()
        })
        .collect();
    Ok(Trace {
        answer,
        clean: last_prob(&clean_logits, answer),
        corrupted,
        noise,
        restored,
    })
}
