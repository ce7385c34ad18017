//! What an edit did: the target's probability and rank after the prompt (efficacy), the KL divergence of
//! the next-token distribution on unrelated prompts (specificity), and both again after quantising the
//! edited model (does the edit survive `f16`, `int8`, `int4`?).

use anyhow::{Context, Result};
use microlens::{DType, Model};

use crate::eval::metrics::{argmax, kl, log_softmax};
use crate::eval::run::run_with_hooks;
use crate::quantize::{encoder_for, requantize, Rounding};
use crate::train::facts::PromptTarget;

/// The next-token log-probabilities after `prompt` (`f64`).
pub fn last_logprobs(model: &Model<'_>, prompt: &[u32]) -> Result<Vec<f64>> {
    let logits = run_with_hooks(model, prompt, &mut ())?;
    Ok(log_softmax(logits.last().context("empty prompt")?))
}

/// A fact's target after its prompt.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Recall {
    /// Its probability.
    pub prob: f64,
    /// Whether it is the top prediction.
    pub top1: bool,
}

/// The target's probability and whether it is the top prediction.
pub fn recall(model: &Model<'_>, fact: &PromptTarget) -> Result<Recall> {
    let lp = last_logprobs(model, &fact.prompt)?;
    let p: Vec<f32> = lp.iter().map(|&x| x as f32).collect();
    Ok(Recall {
        prob: lp[fact.target as usize].exp(),
        top1: argmax(&p) == fact.target as usize,
    })
}

/// Mean over `prompts` of `KL(before || after)` of the next-token distributions after each prompt.
pub fn mean_kl(before: &Model<'_>, after: &Model<'_>, prompts: &[Vec<u32>]) -> Result<f64> {
    let mut sum = 0.0;
    for p in prompts {
        sum += kl(&last_logprobs(before, p)?, &last_logprobs(after, p)?);
    }
    Ok(sum / prompts.len().max(1) as f64)
}

/// The edit after quantising the edited model to one dtype.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Survival {
    /// `f16`, `i8` or `i4`.
    pub dtype: String,
    /// Each edited fact's target after its prompt.
    pub targets: Vec<Recall>,
    /// Mean KL of the quantised edited model from the unedited `f32` one on the unrelated prompts.
    pub unrelated_mean_kl: f64,
}

/// Quantises `edited` to each of `dtypes` with the dtype's activations, rounded to nearest or (`gptq`)
/// with the dtype's default rounding as `convert --dtype D` does, and measures the edit in it.
pub fn survival(
    original: &Model<'_>,
    edited: &Model<'_>,
    facts: &[PromptTarget],
    unrelated: &[Vec<u32>],
    dtypes: &[DType],
    gptq: bool,
) -> Result<Vec<Survival>> {
    dtypes
        .iter()
        .map(|&dtype| {
            let enc = encoder_for(dtype)?;
            let rounding = if gptq {
                Rounding::default_for(dtype)
            } else {
                Rounding::Nearest
            };
            let blob = requantize(edited, dtype, enc.activations(), &rounding)
                .with_context(|| format!("quantising the edited model to {}", dtype.name()))?;
            let q = Model::from_bytes(&blob)?;
            Ok(Survival {
                dtype: dtype.name().to_string(),
                targets: facts.iter().map(|f| recall(&q, f)).collect::<Result<_>>()?,
                unrelated_mean_kl: mean_kl(original, &q, unrelated)?,
            })
        })
        .collect()
}
