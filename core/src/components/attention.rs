//! Causal multi-head attention for the current position, over the KV cache.
//!
//! `q_h = x W_Q[h] + b_Q[h]` (likewise k, v); `score_j = q_h . k_{j,h} / attn_scale` for `j <= pos`;
//! `pattern = softmax(score)`; `z_h = sum_j pattern_j v_{j,h}`; `out = sum_h z_h W_O[h] + b_O`.

use super::block::AttnWeights;
use crate::blob::Activations;
use crate::config::{Config, Positional};
use crate::features;
use crate::hooks::{call, wanted, HookKind, Hooks};
use crate::kv_cache::KvCache;
use crate::math::{rotary, softmax};
use crate::quant::linear::Input;
use crate::weights::{Matrix, Vector};
use crate::workspace::Workspace;

/// Calls `kind` once per head on `buf` (`n_heads * d_head` wide).
fn per_head<H: Hooks>(
    hooks: &mut H,
    kind: HookKind,
    layer: usize,
    pos: usize,
    d_head: usize,
    buf: &mut [f32],
) {
    if wanted(hooks, kind) {
        for (h, slice) in buf.chunks_exact_mut(d_head).enumerate() {
            call(hooks, kind, layer, h, pos, slice);
        }
    }
}

/// `out = W x + b` in the model's arithmetic.
fn project(w: &Matrix<'_>, b: &Vector<'_>, x: &Input<'_>, out: &mut [f32]) {
    x.matvec(w, out);
    b.add_to(out);
}

/// Adds row `pos` of a shortformer positional table to `out`, using `tmp` as scratch.
fn add_positional(table: Option<Matrix<'_>>, pos: usize, out: &mut [f32], tmp: &mut [f32]) {
    if let (Some(t), true) = (table, features::SHORTFORMER) {
        t.row_into(pos, tmp);
        out.iter_mut().zip(tmp.iter()).for_each(|(o, p)| *o += p);
    }
}

/// Attention of block `layer` on the normalised input `ws.normed`, writing `ws.attn_out`.
///
/// With int8 activations, `x` is quantised once for `W_Q`, `W_K` and `W_V`, each head's query once for
/// its scores against the int8 keys, and `z` once for `W_O`. The hooks see `f32` values everywhere:
/// `hook_q/k/v` the projections before the cache rounds `k` and `v` to int8, `hook_pattern` the `f32`
/// softmax; a write is used as written, and rounded to int8 where it next meets an integer kernel.
#[allow(clippy::too_many_arguments)]
pub fn forward<H: Hooks>(
    cfg: &Config,
    activations: Activations,
    w: &AttnWeights<'_>,
    layer: usize,
    pos: usize,
    ws: &mut Workspace<'_>,
    kv: &mut KvCache<'_>,
    hooks: &mut H,
) {
    let dh = cfg.d_head;
    let x = Input::new(ws.normed, activations, ws.quant);
    project(&w.w_q, &w.b_q, &x, ws.q);
    add_positional(w.pos_q, pos, ws.q, ws.z);
    project(&w.w_k, &w.b_k, &x, ws.k);
    add_positional(w.pos_k, pos, ws.k, ws.z);
    project(&w.w_v, &w.b_v, &x, ws.v);
    per_head(hooks, HookKind::Q, layer, pos, dh, ws.q);
    per_head(hooks, HookKind::K, layer, pos, dh, ws.k);
    per_head(hooks, HookKind::V, layer, pos, dh, ws.v);
    if let (Positional::Rotary { adjacent_pairs, .. }, true) = (cfg.positional, features::ROTARY) {
        for (q, k) in ws.q.chunks_exact_mut(dh).zip(ws.k.chunks_exact_mut(dh)) {
            rotary::rotate(q, ws.rot_sin, ws.rot_cos, adjacent_pairs);
            rotary::rotate(k, ws.rot_sin, ws.rot_cos, adjacent_pairs);
        }
        per_head(hooks, HookKind::RotQ, layer, pos, dh, ws.q);
        per_head(hooks, HookKind::RotK, layer, pos, dh, ws.k);
    }
    kv.store(layer, pos, ws.k, ws.v);

    let scale = cfg.layer_attn_scale(layer);
    let row = &mut ws.scores[..=pos.min(cfg.n_ctx - 1)];
    for (h, (q, z)) in
        ws.q.chunks_exact(dh)
            .zip(ws.z.chunks_exact_mut(dh))
            .enumerate()
    {
        let mut max = kv.scores(layer, h, q, ws.quant, scale, row);
        if wanted(hooks, HookKind::AttnScores) {
            call(hooks, HookKind::AttnScores, layer, h, pos, row);
            max = softmax::max(row);
        }
        // The softmax's division by the sum happens here for `hook_pattern`, else in the mix's
        // weights (the same operation on the same values).
        let mut sum = softmax::exp_shifted(row, max);
        if wanted(hooks, HookKind::Pattern) {
            softmax::normalize(row, sum);
            call(hooks, HookKind::Pattern, layer, h, pos, row);
            sum = 1.0;
        }
        kv.mix(layer, h, row, sum, z);
        call(hooks, HookKind::Z, layer, h, pos, z);
    }

    let z = Input::new(ws.z, activations, ws.quant);
    if wanted(hooks, HookKind::Result) {
        ws.attn_out.iter_mut().for_each(|o| *o = 0.0);
        for h in 0..cfg.n_heads {
            for (r, o) in ws.head_out.iter_mut().enumerate() {
                *o = z.dot(&w.w_o, r, h * dh, dh);
            }
            call(hooks, HookKind::Result, layer, h, pos, ws.head_out);
            ws.attn_out
                .iter_mut()
                .zip(ws.head_out.iter())
                .for_each(|(o, r)| *o += r);
        }
        w.b_o.add_to(ws.attn_out);
    } else {
        project(&w.w_o, &w.b_o, &z, ws.attn_out);
    }
    call(hooks, HookKind::AttnOut, layer, 0, pos, ws.attn_out);
}
