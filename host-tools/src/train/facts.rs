//! The fact model's task (`microlens train-facts`): facts `(subject, relation) -> object`, prompted as
//! `s1 s2 r` (a two-token subject, then a relation token) with the object as the next token.
//!
//! The vocabulary is split in three ranges: subject tokens `0..d_vocab/2`, `n_relations` relation tokens,
//! object tokens the rest. Subjects are distinct random token pairs; every (subject, relation) has one
//! random object. The model sees every fact at every step (full batch) and is trained on the object
//! prediction only; nothing else of the prompt is predictable. The facts are what memory editing
//! (`microlens edit`) rewrites and causal tracing (`microlens trace`) locates.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use candle_core::{Device, Tensor, D};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rand::seq::index;
use rand::Rng;

use super::model::{Model, ModelConfig};
use super::trainer::rng;

/// One fact: the prompt `subject[0] subject[1] relation` is followed by `object`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fact {
    /// The two subject tokens.
    pub subject: [u32; 2],
    /// The relation token.
    pub relation: u32,
    /// The object token.
    pub object: u32,
}

impl Fact {
    /// The prompt `s1 s2 r`.
    pub fn prompt(&self) -> [u32; 3] {
        [self.subject[0], self.subject[1], self.relation]
    }
}

/// `s1,s2,r -> o`, the line format of a facts file.
impl fmt::Display for Fact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, r] = self.prompt();
        write!(f, "{a},{b},{r} -> {}", self.object)
    }
}

/// A prompt and the token that should follow it: one line `t1,t2,... -> target` of a facts file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptTarget {
    /// The prompt's tokens.
    pub prompt: Vec<u32>,
    /// The next token.
    pub target: u32,
}

impl FromStr for PromptTarget {
    type Err = anyhow::Error;
    fn from_str(line: &str) -> Result<Self> {
        let Some((prompt, target)) = line.split_once("->") else {
            bail!(
                "`{}` is not `tokens -> target`",
                crate::excerpt::excerpt(line)
            );
        };
        let prompt = crate::io::tokens::parse_tokens(prompt.trim())?;
        let target = target.trim().parse().with_context(|| {
            format!(
                "target `{}` is not a token id",
                crate::excerpt::excerpt(target.trim())
            )
        })?;
        Ok(PromptTarget { prompt, target })
    }
}

/// Reads a facts file: one `t1,t2,... -> target` per line; empty lines and `#` comments are skipped.
pub fn read_facts_file(path: &Path) -> Result<Vec<PromptTarget>> {
    let text = crate::io::files::read_text(path, crate::io::files::TextKind::Tokens)?;
    parse_facts(&text, &path.display().to_string())
}

/// The facts of a facts file's text (`name` is the file's, for errors).
pub fn parse_facts(text: &str, name: &str) -> Result<Vec<PromptTarget>> {
    let facts = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(i, l)| l.parse().with_context(|| format!("{name} line {}", i + 1)))
        .collect::<Result<Vec<_>>>()?;
    ensure!(!facts.is_empty(), "{name} holds no facts");
    Ok(facts)
}

/// The shape of a fact set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FactSpec {
    /// Number of subjects.
    pub n_subjects: usize,
    /// Number of relations (every subject has one object per relation).
    pub n_relations: usize,
    /// Vocabulary size.
    pub d_vocab: usize,
}

impl FactSpec {
    /// Subject tokens are `0..subject_tokens()`.
    pub fn subject_tokens(&self) -> usize {
        self.d_vocab / 2
    }

    /// The first relation token.
    pub fn first_relation(&self) -> u32 {
        self.subject_tokens() as u32
    }

    /// The first object token; objects run to `d_vocab - 1`.
    pub fn first_object(&self) -> u32 {
        (self.subject_tokens() + self.n_relations) as u32
    }

    /// Checks that the ranges fit and the subjects exist.
    pub fn check(&self) -> Result<()> {
        let s = self.subject_tokens();
        ensure!(
            self.n_relations >= 1 && self.n_subjects >= 2,
            "need at least 1 relation and 2 subjects"
        );
        ensure!(
            s.checked_mul(s)
                .is_some_and(|pairs| self.n_subjects <= pairs),
            "{} subjects do not fit in {s} x {s} subject token pairs",
            self.n_subjects
        );
        ensure!(
            u32::try_from(self.d_vocab).is_ok()
                && s.checked_add(self.n_relations)
                    .and_then(|first| first.checked_add(2))
                    .is_some_and(|end| end <= self.d_vocab),
            "vocabulary {} leaves fewer than 2 object tokens after {s} subject and {} relation tokens",
            self.d_vocab,
            self.n_relations
        );
        Ok(())
    }

    /// Draws the facts from `rng`: distinct subject pairs, one uniform object per (subject, relation),
    /// listed subject by subject.
    pub fn draw(&self, rng: &mut impl Rng) -> Result<Vec<Fact>> {
        self.check()?;
        let s = self.subject_tokens();
        let n_objects = self.d_vocab as u32 - self.first_object();
        let pairs = index::sample(rng, s * s, self.n_subjects);
        Ok(pairs
            .into_iter()
            .flat_map(|p| {
                let subject = [(p / s) as u32, (p % s) as u32];
                (0..self.n_relations as u32)
                    .map(move |r| (subject, self.first_relation() + r))
                    .collect::<Vec<_>>()
            })
            .map(|(subject, relation)| Fact {
                subject,
                relation,
                object: self.first_object() + rng.random_range(0..n_objects),
            })
            .collect())
    }
}

/// Hyper-parameters of a fact model's training.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FactsTrainConfig {
    /// Model shape (`n_ctx >= 3`).
    pub model: ModelConfig,
    /// MLP width.
    pub d_mlp: usize,
    /// The facts.
    pub spec: FactSpec,
    /// Optimiser steps (full batch).
    pub steps: usize,
    /// Learning rate (AdamW), divided by 10 for the last quarter of the steps.
    pub lr: f64,
    /// AdamW weight decay.
    pub weight_decay: f64,
    /// Seed: stream 0 the initial weights, stream 2 the facts.
    pub seed: u64,
}

/// A trained fact model.
pub struct TrainedFacts {
    /// The model.
    pub model: Model,
    /// The facts it was trained on.
    pub facts: Vec<Fact>,
    /// Last step's loss.
    pub loss: f64,
    /// Last step's share of facts recalled (candle forward).
    pub accuracy: f64,
    /// Wall time of the loop.
    pub elapsed: Duration,
}

/// Trains a fact model from scratch, calling `on_step(step, loss, accuracy)` after every step.
pub fn train_facts(
    cfg: &FactsTrainConfig,
    mut on_step: impl FnMut(usize, f64, f64),
) -> Result<TrainedFacts> {
    ensure!(cfg.steps > 0, "steps must be positive");
    ensure!(
        cfg.model.n_ctx >= 3,
        "n_ctx must hold a 3-token prompt, not {}",
        cfg.model.n_ctx
    );
    ensure!(
        cfg.model.d_vocab == cfg.spec.d_vocab,
        "the model's and the facts' vocabularies differ"
    );
    let facts = cfg.spec.draw(&mut rng(cfg.seed, 2))?;
    let model = Model::with_mlp(cfg.model, cfg.d_mlp, &mut rng(cfg.seed, 0))?;
    let prompts: Vec<u32> = facts.iter().flat_map(|f| f.prompt()).collect();
    let objects: Vec<u32> = facts.iter().map(|f| f.object).collect();
    let n = facts.len();
    let tokens = Tensor::from_vec(prompts, (n, 3), &Device::Cpu)?;
    let targets = Tensor::from_vec(objects, n, &Device::Cpu)?;
    let params = ParamsAdamW {
        lr: cfg.lr,
        weight_decay: cfg.weight_decay,
        ..ParamsAdamW::default()
    };
    let mut opt = AdamW::new(model.vars(), params)?;
    let start = Instant::now();
    let (mut loss, mut accuracy) = (f64::NAN, 0.0);
    for step in 0..cfg.steps {
        let logits = model.forward(&tokens)?.logits.narrow(1, 2, 1)?.squeeze(1)?;
        let logp = candle_nn::ops::log_softmax(&logits, D::Minus1)?;
        let l = logp.gather(&targets.unsqueeze(1)?, 1)?.neg()?.mean_all()?;
        opt.set_learning_rate(if 4 * step >= 3 * cfg.steps {
            cfg.lr / 10.0
        } else {
            cfg.lr
        });
        opt.backward_step(&l)?;
        loss = f64::from(l.to_scalar::<f32>()?);
        let hits = logits
            .argmax(D::Minus1)?
            .eq(&targets)?
            .to_dtype(candle_core::DType::F32)?
            .sum_all()?
            .to_scalar::<f32>()?;
        accuracy = f64::from(hits) / n as f64;
        on_step(step + 1, loss, accuracy);
    }
    Ok(TrainedFacts {
        model,
        facts,
        loss,
        accuracy,
        elapsed: start.elapsed(),
    })
}

/// The share of `facts` whose object is the core forward's top prediction after the prompt.
pub fn recall(model: &microlens::Model<'_>, facts: &[PromptTarget]) -> Result<f64> {
    let mut hits = 0;
    for f in facts {
        let logits = crate::eval::run::run_with_hooks(model, &f.prompt, &mut ())?;
        let last = logits.last().context("empty prompt")?;
        hits += usize::from(crate::eval::metrics::argmax(last) == f.target as usize);
    }
    Ok(hits as f64 / facts.len().max(1) as f64)
}

/// Writes the facts, one `s1,s2,r -> o` per line, after a comment naming the vocabulary ranges.
pub fn write_facts_file(path: &Path, spec: &FactSpec, facts: &[Fact]) -> Result<()> {
    let mut text = format!(
        "# {} facts: subject tokens 0..{}, relations {}..{}, objects {}..{}; `s1,s2,r -> object`\n",
        facts.len(),
        spec.subject_tokens(),
        spec.first_relation(),
        spec.first_object(),
        spec.first_object(),
        spec.d_vocab
    );
    for f in facts {
        text += &format!("{f}\n");
    }
    crate::io::output::atomic_write(path, text.as_bytes())
}

/// The facts of a facts file as [`PromptTarget`]s.
pub fn as_prompt_targets(facts: &[Fact]) -> Vec<PromptTarget> {
    facts
        .iter()
        .map(|f| PromptTarget {
            prompt: f.prompt().to_vec(),
            target: f.object,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{convert, ConvertOptions};
    use microlens::{Normalization, Positional};

    fn small() -> FactsTrainConfig {
        FactsTrainConfig {
            model: ModelConfig {
                n_layers: 2,
                d_model: 32,
                n_heads: 2,
                d_head: 16,
                d_vocab: 32,
                n_ctx: 4,
                positional: Positional::Standard,
                norm: Normalization::LN,
                eps: 1e-5,
            },
            d_mlp: 64,
            spec: FactSpec {
                n_subjects: 12,
                n_relations: 2,
                d_vocab: 32,
            },
            steps: 300,
            lr: 1e-2,
            weight_decay: 0.01,
            seed: 3,
        }
    }

    /// Trains, exports, converts: the core forward on the blob gives candle's logits and recalls every
    /// fact.
    #[test]
    fn a_small_fact_model_trains_and_the_core_runs_it_as_candle_does() {
        let cfg = small();
        let trained = train_facts(&cfg, |_, _, _| {}).unwrap();
        assert_eq!(trained.facts.len(), 24);
        assert!(trained.accuracy == 1.0, "{}", trained.accuracy);
        let dir = tempfile::tempdir().unwrap();
        let out = super::super::export::export(&trained.model, dir.path(), "f", 3).unwrap();
        let opts = ConvertOptions {
            config: Some(out.config.clone()),
            ..ConvertOptions::default()
        };
        let blob = convert(&out.weights, &opts).unwrap().blob;
        let core = microlens::Model::from_bytes(&blob).unwrap();
        assert_eq!(core.config().d_mlp, Some(64));
        let prompts: Vec<u32> = trained.facts.iter().flat_map(|f| f.prompt()).collect();
        let tokens = Tensor::from_vec(prompts, (24, 3), &Device::Cpu).unwrap();
        let logits: Vec<Vec<Vec<f32>>> = trained
            .model
            .forward(&tokens)
            .unwrap()
            .logits
            .to_vec3()
            .unwrap();
        for (f, candle) in trained.facts.iter().zip(&logits) {
            let ours = crate::eval::run::run_with_hooks(&core, &f.prompt(), &mut ()).unwrap();
            // Logits up to TransformerLens's centring of W_U (a constant per position).
            for (a, b) in ours.iter().zip(candle) {
                let shift = a[0] - b[0];
                let err = a
                    .iter()
                    .zip(b)
                    .map(|(x, y)| (x - y - shift).abs())
                    .fold(0.0, f32::max);
                assert!(err < 1e-3, "{f}: {err}");
            }
        }
        assert_eq!(
            recall(&core, &as_prompt_targets(&trained.facts)).unwrap(),
            1.0
        );
    }

    #[test]
    fn facts_files_round_trip_and_bad_lines_are_named() {
        let spec = small().spec;
        let facts = spec.draw(&mut rng(1, 2)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.facts");
        write_facts_file(&path, &spec, &facts).unwrap();
        assert_eq!(read_facts_file(&path).unwrap(), as_prompt_targets(&facts));
        std::fs::write(&path, "1,2,3 -> 4\n1,2 5\n").unwrap();
        let err = format!("{:#}", read_facts_file(&path).unwrap_err());
        assert!(err.contains("line 2"), "{err}");
        std::fs::write(&path, "# nothing\n").unwrap();
        assert!(read_facts_file(&path).is_err());
        assert!(FactSpec {
            n_subjects: 1000,
            n_relations: 2,
            d_vocab: 32
        }
        .check()
        .is_err());
    }
}
