//! A batch's activation cache recorded in place: each wanted `(kind, layer)` gets one contiguous
//! `[batch, ...]` buffer in TransformerLens's layout ([`Layout`]) before the run, and each sequence's
//! forward pass (on rayon's threads, one sequence each) writes every hook call straight into its own
//! part of it. The same values, names and shapes as [`ActivationCache::tensors`] of each sequence,
//! stacked.

use anyhow::{bail, Context, Result};
use microlens::{HookKind, HookKinds, HookPoint, Hooks, Model};
use rayon::prelude::*;

use crate::eval::cache::{hook_name, ActivationCache};
use crate::eval::layout::Layout;
use crate::eval::run::{check_words, run_with_hooks};

/// One activation of a batch: its TransformerLens 2.x name, its layout and its values `[batch, ...]`.
#[derive(Clone, Debug)]
pub struct BatchTensor {
    /// `blocks.0.attn.hook_pattern`, ...
    pub name: String,
    /// Where each sequence's values lie in its part.
    pub layout: Layout,
    /// `batch · layout.len()` values, sequence after sequence.
    pub data: Vec<f32>,
}

impl BatchTensor {
    /// The shape with the batch dimension first.
    pub fn shape(&self, batch: usize) -> Vec<usize> {
        let mut shape = vec![batch];
        shape.extend(self.layout.shape());
        shape
    }
}

/// A batch's logits and activations.
#[derive(Clone, Debug)]
pub struct BatchCache {
    /// `[batch, pos, d_vocab_out]`, sequence after sequence.
    pub logits: Vec<f32>,
    /// Every activation `wanted` kept, in `(kind, layer)` order.
    pub tensors: Vec<BatchTensor>,
}

/// Runs every sequence of `rows` (checked, all of one length) through `model`, each on a rayon
/// thread, recording the `(kind, layer)` activations of `kinds` that `wanted` (given each's 2.x name)
/// keeps. Errors come in sequence order.
pub fn record_batch(
    model: &Model<'_>,
    rows: &[Vec<u32>],
    kinds: HookKinds,
    wanted: impl Fn(&str) -> bool,
) -> Result<BatchCache> {
    let (batch, n_pos) = (rows.len(), rows.first().map_or(0, Vec::len));
    if batch == 0 || n_pos == 0 {
        bail!("no tokens given");
    }
    if rows.iter().any(|r| r.len() != n_pos) {
        bail!("the sequences of a batch must all have {n_pos} tokens");
    }
    // Which points this model calls, and how wide each is: a one-token run.
    let (probe, _) = ActivationCache::record(model, &rows[0][..1], kinds)?;
    let mut tensors = Vec::new();
    for layout in probe.layouts(model.config(), n_pos) {
        let name = hook_name(layout.kind, layout.layer);
        if !wanted(&name) {
            continue;
        }
        check_words(&[batch, layout.len()], &name)?;
        // Zeros (pages the kernel zeroes as they are first touched); other fills by each sequence.
        let data = vec![0.0; batch * layout.len()];
        tensors.push(BatchTensor { name, layout, data });
    }
    let dv = model.config().d_vocab_out;
    check_words(&[batch, n_pos, dv], "logits")?;
    let mut logits = vec![0.0; batch * n_pos * dv];
    let layouts: Vec<Layout> = tensors.iter().map(|t| t.layout).collect();
    // Each sequence's part of every buffer.
    let mut parts: Vec<Vec<&mut [f32]>> = (0..batch).map(|_| Vec::new()).collect();
    for t in &mut tensors {
        let len = t.layout.len();
        let mut chunks = t.data.chunks_mut(len.max(1));
        for part in &mut parts {
            part.push(if len == 0 {
                &mut []
            } else {
                chunks.next().unwrap_or_default()
            });
        }
    }
    let results: Vec<Result<()>> = rows
        .par_iter()
        .zip(parts.into_par_iter())
        .zip(logits.par_chunks_mut(n_pos * dv))
        .map(|((row, mut out), logits_out)| {
            for (part, layout) in out.iter_mut().zip(&layouts) {
                if layout.fill() != 0.0 {
                    part.fill(layout.fill());
                }
            }
            let mut recorder = Recorder::new(model, &layouts, out);
            let row_logits = run_with_hooks(model, row, &mut recorder)?;
            for (dst, src) in logits_out.chunks_exact_mut(dv).zip(&row_logits) {
                dst.copy_from_slice(src);
            }
            Ok(())
        })
        .collect();
    for (i, r) in results.into_iter().enumerate() {
        r.with_context(|| format!("sequence {i} of the batch"))?;
    }
    Ok(BatchCache { logits, tensors })
}

/// One sequence's hooks: each call copied into its `(kind, layer)`'s part.
struct Recorder<'l, 'o> {
    layouts: &'l [Layout],
    out: Vec<&'o mut [f32]>,
    /// The index into `layouts` of each `(kind, layer)`: `kind · layers + layer`.
    index: Vec<Option<usize>>,
    layers: usize,
    kinds: HookKinds,
}

impl<'l, 'o> Recorder<'l, 'o> {
    fn new(model: &Model<'_>, layouts: &'l [Layout], out: Vec<&'o mut [f32]>) -> Self {
        let layers = model.config().n_layers.max(1);
        let mut index = vec![None; HookKind::ALL.len() * layers];
        let mut kinds = HookKinds::NONE;
        for (i, l) in layouts.iter().enumerate() {
            if let Some(slot) = index.get_mut(l.kind as usize * layers + l.layer) {
                *slot = Some(i);
                kinds = kinds.with(l.kind);
            }
        }
        Recorder {
            layouts,
            out,
            index,
            layers,
            kinds,
        }
    }
}

impl Hooks for Recorder<'_, '_> {
    #[inline]
    fn wants(&self, kind: HookKind) -> bool {
        self.kinds.contains(kind)
    }

    fn hook(&mut self, point: HookPoint, act: &mut [f32]) {
        if point.layer >= self.layers {
            return;
        }
        let slot = self.index[point.kind as usize * self.layers + point.layer];
        if let Some(i) = slot {
            // Every point of this model fits its layout (the probe run measured them).
            let written = self.layouts[i].write(&mut *self.out[i], point.head, point.pos, act);
            debug_assert!(written, "{point} does not fit its layout");
        }
    }
}
