//! Causal multi-head attention for the current position, over the KV cache.
//!
//! `q_h = x W_Q[h] + b_Q[h]` (likewise k, v); `score_j = q_h . k_{j,h} / attn_scale` for `j <= pos`;
//! `pattern = softmax(score)`; `z_h = sum_j pattern_j v_{j,h}`; `out = sum_h z_h W_O[h] + b_O`.

use super::block::AttnWeights;
use super::Step;
use crate::blob::DType;
use crate::config::Positional;
use crate::features;
use crate::hooks::{HookKind, Hooks};
use crate::kv_cache::KvCache;
use crate::math::{rotary, softmax};
use crate::quant::linear::{width, Input};
use crate::weights::{Matrix, Vector};
use crate::workspace::Workspace;

/// Calls `kind` once per head on `buf` (`n_heads * d_head` wide).
fn per_head<H: Hooks>(s: &mut Step<'_, '_, H>, kind: HookKind, buf: &mut [f32]) {
    if s.wants(kind) {
        for (h, slice) in buf.chunks_exact_mut(s.cfg.d_head).enumerate() {
            s.hook(kind, h, slice);
        }
    }
}

/// `out = W x + b` in the model's arithmetic.
fn project(w: &Matrix<'_>, b: &Vector<'_>, x: &mut Input<'_>, out: &mut [f32]) {
    // With the int8 kernel in the build, the bias is added as it rescales; else in a pass of its
    // own, as the float builds' stack measurements assume.
    match DType::I8.compiled() {
        true => x.matvec(w, Some(b), out),
        false => {
            x.matvec(w, None, out);
            b.add_to(out);
        }
    }
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
pub(crate) fn forward<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    w: &AttnWeights<'_>,
    ws: &mut Workspace<'_>,
    kv: &mut KvCache<'_>,
) {
    let (cfg, activations, layer, pos) = (s.cfg, s.act, s.layer, s.pos);
    let dh = cfg.d_head;
    let mut x = Input::new(ws.normed, activations, ws.quant);
    project(&w.w_q, &w.b_q, &mut x, ws.q);
    add_positional(w.pos_q, pos, ws.q, ws.z);
    project(&w.w_k, &w.b_k, &mut x, ws.k);
    add_positional(w.pos_k, pos, ws.k, ws.z);
    project(&w.w_v, &w.b_v, &mut x, ws.v);
    per_head(s, HookKind::Q, ws.q);
    per_head(s, HookKind::K, ws.k);
    per_head(s, HookKind::V, ws.v);
    if let (Positional::Rotary { adjacent_pairs, .. }, true) = (cfg.positional, features::ROTARY) {
        for (q, k) in ws.q.chunks_exact_mut(dh).zip(ws.k.chunks_exact_mut(dh)) {
            rotary::rotate(q, ws.rot_sin, ws.rot_cos, adjacent_pairs);
            rotary::rotate(k, ws.rot_sin, ws.rot_cos, adjacent_pairs);
        }
        per_head(s, HookKind::RotQ, ws.q);
        per_head(s, HookKind::RotK, ws.k);
    }
    kv.store(layer, pos, ws.k, ws.v);

    let scale = cfg.layer_attn_scale(layer);
    let wide_q = width(activations) == Some(true);
    let row = &mut ws.scores[..=pos.min(cfg.n_ctx - 1)];
    for (h, (q, z)) in
        ws.q.chunks_exact(dh)
            .zip(ws.z.chunks_exact_mut(dh))
            .enumerate()
    {
        let mut max = kv.scores(layer, h, q, wide_q, ws.quant, scale, row);
        if s.wants(HookKind::AttnScores) {
            s.hook(HookKind::AttnScores, h, row);
            max = softmax::max(row);
        }
        // The softmax's division by the sum happens here for `hook_pattern`, else in the mix's
        // weights (the same operation on the same values).
        // The host's SIMD copy where it is built (the same bits).
        #[cfg(feature = "std")]
        let mut sum = crate::host::exp_shifted(row, max);
        #[cfg(not(feature = "std"))]
        let mut sum = softmax::exp_shifted(row, max);
        if s.wants(HookKind::Pattern) {
            softmax::normalize(row, sum);
            s.hook(HookKind::Pattern, h, row);
            sum = 1.0;
        }
        kv.mix(layer, h, row, sum, z);
        s.hook(HookKind::Z, h, z);
    }

    let mut z = Input::new(ws.z, activations, ws.quant);
    if s.wants(HookKind::Result) {
        ws.attn_out.iter_mut().for_each(|o| *o = 0.0);
        for h in 0..cfg.n_heads {
            for (r, o) in ws.head_out.iter_mut().enumerate() {
                *o = z.dot(&w.w_o, r, h * dh, dh);
            }
            s.hook(HookKind::Result, h, ws.head_out);
            ws.attn_out
                .iter_mut()
                .zip(ws.head_out.iter())
                .for_each(|(o, r)| *o += r);
        }
        w.b_o.add_to(ws.attn_out);
    } else {
        project(&w.w_o, &w.b_o, &mut z, ws.attn_out);
    }
    s.hook(HookKind::AttnOut, 0, ws.attn_out);
}
