//! Activation cache: every hook activation of a run, keyed by hook point, and its export under
//! TransformerLens names and shapes without the batch dimension (as `run_with_cache(...,
//! remove_batch_dim=True)`), e.g. `blocks.0.attn.hook_q` `[pos, head, d_head]`,
//! `blocks.0.attn.hook_pattern` `[head, query, key]` (zeros above the diagonal, `-inf` for
//! `hook_attn_scores`), `blocks.0.ln1.hook_scale` `[pos, 1]`, to safetensors.
//!
//! `hook_result` is recorded like TransformerLens's `use_attn_result=True`; `logits` (`[pos, d_vocab_out]`)
//! is not a TransformerLens 2.x hook but is included under that name.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{bail, Result};
use microlens::{Config, HookKind, HookKinds, HookPoint, Hooks, Model};

use crate::eval::hook_names::aliases;
use crate::eval::layout::Layout;
use crate::eval::run::run_with_hooks;
use crate::import::state_dict::Tensor;
use crate::io::output::Outputs;
use crate::io::safetensors::to_safetensors;

/// Activations recorded at every wanted hook point of a run.
#[derive(Clone, Debug, Default)]
pub struct ActivationCache {
    kinds: HookKinds,
    acts: HashMap<HookPoint, Vec<f32>>,
}

impl ActivationCache {
    /// An empty cache recording the points of `kinds`.
    pub fn new(kinds: HookKinds) -> Self {
        ActivationCache {
            kinds,
            acts: HashMap::new(),
        }
    }

    /// Runs `tokens` through `model` from position 0, recording `kinds`; returns the cache and the logits.
    pub fn record(
        model: &Model<'_>,
        tokens: &[u32],
        kinds: HookKinds,
    ) -> Result<(Self, Vec<Vec<f32>>)> {
        let mut cache = ActivationCache::new(kinds);
        let logits = run_with_hooks(model, tokens, &mut cache)?;
        Ok((cache, logits))
    }

    /// Records `act` at `point` (a device's activation read over the wire, `microlens device cache`).
    pub fn insert(&mut self, point: HookPoint, act: Vec<f32>) {
        self.acts.insert(point, act);
    }

    /// The activation recorded at `point`.
    pub fn get(&self, point: &HookPoint) -> Option<&[f32]> {
        self.acts.get(point).map(Vec::as_slice)
    }

    /// Every activation as a TransformerLens-named tensor, for a run of `n_pos` positions.
    pub fn tensors(&self, cfg: &Config, n_pos: usize) -> BTreeMap<String, Tensor> {
        self.layouts(cfg, n_pos)
            .into_iter()
            .map(|layout| {
                let name = hook_name(layout.kind, layout.layer);
                (name, self.assemble(&layout))
            })
            .collect()
    }

    /// The layout of every `(kind, layer)` recorded, in `(kind, layer)` order, each as wide as its
    /// widest activation.
    pub fn layouts(&self, cfg: &Config, n_pos: usize) -> Vec<Layout> {
        let mut widths: BTreeMap<(HookKind, usize), usize> = BTreeMap::new();
        for (p, act) in &self.acts {
            let width = widths.entry((p.kind, p.layer)).or_default();
            *width = (*width).max(act.len());
        }
        widths
            .into_iter()
            .map(|((kind, layer), width)| Layout::new(cfg, kind, layer, width, n_pos))
            .collect()
    }

    /// The tensor of `layout`'s activations.
    fn assemble(&self, layout: &Layout) -> Tensor {
        let mut data = vec![layout.fill(); layout.len()];
        for pos in 0..layout.n_pos {
            for head in 0..layout.heads {
                let point = HookPoint {
                    kind: layout.kind,
                    layer: layout.layer,
                    head,
                    pos,
                };
                if let Some(act) = self.acts.get(&point) {
                    layout.write(&mut data, head, pos, act);
                }
            }
        }
        Tensor {
            shape: layout.shape(),
            data,
        }
    }
}

impl Hooks for ActivationCache {
    fn wants(&self, kind: HookKind) -> bool {
        self.kinds.contains(kind)
    }
    fn hook(&mut self, point: HookPoint, act: &mut [f32]) {
        self.acts.insert(point, act.to_vec());
    }
}

/// The TransformerLens name of `kind` at `layer` (`blocks.1.attn.hook_pattern`; `layer` ignored outside
/// the blocks).
pub fn hook_name(kind: HookKind, layer: usize) -> String {
    HookPoint {
        kind,
        layer,
        head: 0,
        pos: 0,
    }
    .to_string()
}

/// Runs `tokens` through `model` and writes every activation one of whose names (TransformerLens 2.x's,
/// then 4.x's: [`aliases`]) matches `names`, under the first that matches (all, under 2.x names, when
/// `None`) to `out` as safetensors, never onto one of `outputs`' inputs. Returns the names
/// written.
pub fn write_cache(
    model: &Model<'_>,
    tokens: &[u32],
    names: Option<&regex::Regex>,
    outputs: &Outputs,
    out: &Path,
) -> Result<Vec<String>> {
    let (cache, _) = ActivationCache::record(model, tokens, HookKinds::ALL)?;
    write_tensors(&cache, model.config(), tokens.len(), names, outputs, out)
}

/// Writes the activations of `cache` (a run of `n_pos` positions of a model of `cfg`) one of whose
/// names ([`aliases`]) matches `names`, under the first that matches (all, under 2.x names, when
/// `None`), to `out` as safetensors, never onto one of `outputs`' inputs. Returns the names written.
pub fn write_tensors(
    cache: &ActivationCache,
    cfg: &Config,
    n_pos: usize,
    names: Option<&regex::Regex>,
    outputs: &Outputs,
    out: &Path,
) -> Result<Vec<String>> {
    let mut tensors = cache.tensors(cfg, n_pos);
    if let Some(re) = names {
        tensors = tensors
            .into_iter()
            .filter_map(|(name, t)| {
                let chosen = aliases(&name, cfg.n_layers)
                    .into_iter()
                    .find(|n| re.is_match(n))?;
                Some((chosen, t))
            })
            .collect();
    }
    if tensors.is_empty() {
        bail!("no hook name matches the --names pattern");
    }
    outputs.write(out, &to_safetensors(&tensors)?)?;
    Ok(tensors.into_keys().collect())
}
