//! Activation patching (causal mediation, TransformerLens's `patching.py`): run the corrupted sequence
//! with one activation replaced by its value on the clean sequence, and measure the logit difference
//! `logit[answer] - logit[wrong]` at the last position. Patched: the residual stream
//! (`hook_resid_pre`) by layer and position, and head outputs (`hook_z`, as TransformerLens's
//! `get_act_patch_attn_head_out_*`) over all positions and by position.

use anyhow::{bail, Result};
use microlens::{HookKind, HookKinds, HookPoint, Hooks, Model};

use crate::eval::cache::ActivationCache;
use crate::eval::run::{par_map, run_with_hooks};

/// `logits[last][answer] - logits[last][wrong]`.
pub fn logit_diff(logits: &[Vec<f32>], answer: u32, wrong: u32) -> f64 {
    logits.last().map_or(0.0, |l| {
        l[answer as usize] as f64 - l[wrong as usize] as f64
    })
}

/// Patching results: raw logit differences.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Patching {
    /// Logit difference on the clean sequence.
    pub clean: f64,
    /// Logit difference on the corrupted sequence.
    pub corrupt: f64,
    /// `[layer][pos]`: corrupted run with the clean `blocks.L.hook_resid_pre` at `pos`.
    pub resid_pre: Vec<Vec<f64>>,
    /// `[layer][head]`: corrupted run with the clean `hook_z` of that head at every position.
    pub head_out: Vec<Vec<f64>>,
    /// `[layer][pos][head]`: corrupted run with the clean `hook_z` of that head at `pos`.
    pub head_out_by_pos: Vec<Vec<Vec<f64>>>,
}

impl Patching {
    /// `(x - corrupt) / (clean - corrupt)`: 0 = no effect, 1 = the clean behaviour fully restored.
    pub fn normalized(&self, x: f64) -> f64 {
        let span = self.clean - self.corrupt;
        if span == 0.0 {
            0.0
        } else {
            (x - self.corrupt) / span
        }
    }
}

/// Copies the clean activation in at the points `select` picks.
struct Patch<'a, F: Fn(&HookPoint) -> bool> {
    clean: &'a ActivationCache,
    kind: HookKind,
    select: F,
}

impl<F: Fn(&HookPoint) -> bool> Hooks for Patch<'_, F> {
    fn wants(&self, kind: HookKind) -> bool {
        kind == self.kind
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        if (self.select)(&p) {
            if let Some(clean) = self.clean.get(&p) {
                act.copy_from_slice(clean);
            }
        }
    }
}

/// Patches `clean` into `corrupt` (same length) everywhere this module describes.
pub fn activation_patching(
    model: &Model<'_>,
    clean: &[u32],
    corrupt: &[u32],
    answer: u32,
    wrong: u32,
) -> Result<Patching> {
    let cfg = model.config();
    if clean.len() != corrupt.len() {
        bail!(
            "clean ({}) and corrupted ({}) sequences must have the same length",
            clean.len(),
            corrupt.len()
        );
    }
    if answer as usize >= cfg.d_vocab_out || wrong as usize >= cfg.d_vocab_out {
        bail!(
            "answer and wrong tokens must be below d_vocab_out = {}",
            cfg.d_vocab_out
        );
    }
    let (cache, clean_logits) = ActivationCache::record(
        model,
        clean,
        HookKinds::of(&[HookKind::ResidPre, HookKind::Z]),
    )?;
    let corrupt_logits = run_with_hooks(model, corrupt, &mut ())?;
    let patched = |kind, select: &(dyn Fn(&HookPoint) -> bool + Sync)| -> Result<f64> {
        let logits = run_with_hooks(
            model,
            corrupt,
            &mut Patch {
                clean: &cache,
                kind,
                select,
            },
        )?;
        Ok(logit_diff(&logits, answer, wrong))
    };
    let (layers, heads, positions) = (0..cfg.n_layers, 0..cfg.n_heads, 0..clean.len());
    // Every cell its own patched run, in parallel; the table in row order.
    let table = |rows: std::ops::Range<usize>,
                 cols: std::ops::Range<usize>,
                 f: &(dyn Fn(usize, usize) -> Result<f64> + Sync)|
     -> Result<Vec<Vec<f64>>> {
        let cells: Vec<(usize, usize)> = rows
            .clone()
            .flat_map(|r| cols.clone().map(move |c| (r, c)))
            .collect();
        let values = par_map(&cells, |&(r, c)| f(r, c))?;
        Ok(match cols.len() {
            0 => vec![Vec::new(); rows.len()],
            n => values.chunks(n).map(<[f64]>::to_vec).collect(),
        })
    };
    let resid_pre = table(layers.clone(), positions.clone(), &|layer, pos| {
        patched(HookKind::ResidPre, &|p| p.layer == layer && p.pos == pos)
    })?;
    let head_out = table(layers.clone(), heads.clone(), &|layer, head| {
        patched(HookKind::Z, &|p| p.layer == layer && p.head == head)
    })?;
    let head_out_by_pos = layers
        .map(|layer| {
            table(positions.clone(), heads.clone(), &|pos, head| {
                patched(HookKind::Z, &|p| {
                    p.layer == layer && p.head == head && p.pos == pos
                })
            })
        })
        .collect::<Result<_>>()?;
    Ok(Patching {
        clean: logit_diff(&clean_logits, answer, wrong),
        corrupt: logit_diff(&corrupt_logits, answer, wrong),
        resid_pre,
        head_out,
        head_out_by_pos,
    })
}
