//! Causal multi-head attention for the current position, over the KV cache.
//!
//! `q_h = x W_Q[h] + b_Q[h]` (likewise k, v for each key/value head); `score_j = q_h . k_{j,g} /
//! attn_scale` for `j <= pos`, `g` the key/value head of `h` (`h` itself without grouped-query
//! attention); `pattern = softmax(score)`; `z_h = sum_j pattern_j v_{j,g}`; `out = sum_h z_h W_O[h] + b_O`.

use super::{Rows, Step};
use crate::blob::DType;
use crate::config::Positional;
use crate::features;
use crate::hooks::{HookKind, Hooks};
use crate::kv_cache::KvCache;
use crate::math::{rotary, softmax};
use crate::quant::linear::{batched, matmul_rows, width, Input};
use crate::weights::{Matrix, Vector};
use crate::workspace::{row, Workspace};

/// Attention weights of one block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttnWeights<'a> {
    /// `W_Q`, `[n_heads * d_head, d_model]`.
    pub w_q: Matrix<'a>,
    /// `b_Q`.
    pub b_q: Vector<'a>,
    /// `W_K`, `[n_key_value_heads * d_head, d_model]`.
    pub w_k: Matrix<'a>,
    /// `b_K`.
    pub b_k: Vector<'a>,
    /// `W_V`.
    pub w_v: Matrix<'a>,
    /// `b_V`.
    pub b_v: Vector<'a>,
    /// `W_O`, `[d_model, n_heads * d_head]`.
    pub w_o: Matrix<'a>,
    /// `b_O`.
    pub b_o: Vector<'a>,
    /// Shortformer positional queries `W_pos W_Q`.
    pub pos_q: Option<Matrix<'a>>,
    /// Shortformer positional keys `W_pos W_K`.
    pub pos_k: Option<Matrix<'a>>,
}

/// Calls `kind` once per head on `buf` (`d_head` per head: query heads, or key/value heads).
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

/// Adds row `pos` of a shortformer positional table to `out`.
fn add_positional(table: Option<Matrix<'_>>, pos: usize, out: &mut [f32]) {
    if let (Some(t), true) = (table, features::SHORTFORMER) {
        t.add_row_to(pos, out);
    }
}

/// Attention of block `s.layer` on the normalised inputs `ws.normed` of the rows, writing
/// `ws.attn_out`, in the natural phases of causal attention: the
/// projections of every position ([`project_qkv`]), each position's keys and values into the cache
/// ([`store`]), each position's scores, softmax and mix over the positions up to its own ([`mix`]),
/// the output projection of every position ([`output`]). One row is the device's step; a run
/// computes each position's values with the same operations.
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
    rows: Rows,
) {
    project_qkv(s, w, ws, rows);
    store(s, w, ws, kv, rows);
    mix(s, ws, kv, rows);
    output(s, w, ws, rows);
}

/// `q`, `k` and `v` of every position of the run (their hooks are [`store`]'s).
#[inline(always)]
fn project_qkv<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    w: &AttnWeights<'_>,
    ws: &mut Workspace<'_>,
    rows: Rows,
) {
    let (dm, da, act, n) = (s.cfg.d_model, s.cfg.d_attn(), s.act, rows.len());
    let dk = s.cfg.d_kv();
    if batched(act, n) {
        matmul_rows(&w.w_q, Some(&w.b_q), ws.normed, n, ws.q, da);
        matmul_rows(&w.w_k, Some(&w.b_k), ws.normed, n, ws.k, dk);
        matmul_rows(&w.w_v, Some(&w.b_v), ws.normed, n, ws.v, dk);
        return;
    }
    rows.each(s, |_, r| {
        let mut x = Input::new(row(ws.normed, r, dm), act, ws.quant);
        project(&w.w_q, &w.b_q, &mut x, row(ws.q, r, da));
        project(&w.w_k, &w.b_k, &mut x, row(ws.k, r, dk));
        project(&w.w_v, &w.b_v, &mut x, row(ws.v, r, dk));
    });
}

/// Per position: the shortformer positions, `hook_q/k/v`, the rotation, then its keys and values
/// into the cache.
#[inline(always)]
fn store<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    w: &AttnWeights<'_>,
    ws: &mut Workspace<'_>,
    kv: &mut KvCache<'_>,
    rows: Rows,
) {
    let (cfg, layer) = (s.cfg, s.layer);
    let (dh, da, dk) = (cfg.d_head, cfg.d_attn(), cfg.d_kv());
    rows.each(s, |s, r| {
        let (q, k, v) = (row(ws.q, r, da), row(ws.k, r, dk), row(ws.v, r, dk));
        add_positional(w.pos_q, s.pos, q);
        add_positional(w.pos_k, s.pos, k);
        per_head(s, HookKind::Q, q);
        per_head(s, HookKind::K, k);
        per_head(s, HookKind::V, v);
        if let (
            Positional::Rotary {
                adjacent_pairs,
                dim,
                ..
            },
            true,
        ) = (cfg.positional, features::ROTARY)
        {
            let (sin, cos) = (row(ws.rot_sin, r, dim), row(ws.rot_cos, r, dim));
            rotary::rotate_heads(q, dh, sin, cos, adjacent_pairs);
            rotary::rotate_heads(k, dh, sin, cos, adjacent_pairs);
            per_head(s, HookKind::RotQ, q);
            per_head(s, HookKind::RotK, k);
        }
        kv.store(layer, s.pos, k, v);
    });
}

/// Per position and head: the scores over the positions up to it, the softmax, the mix into `z`.
#[inline(always)]
fn mix<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    ws: &mut Workspace<'_>,
    kv: &mut KvCache<'_>,
    rows: Rows,
) {
    let (cfg, activations, layer) = (s.cfg, s.act, s.layer);
    let (dh, da) = (cfg.d_head, cfg.d_attn());
    let scale = cfg.layer_attn_scale(layer);
    let wide_q = width(activations) == Some(true);
    rows.each(s, |s, r| {
        let keys = s.pos.min(cfg.n_ctx - 1) + 1;
        let (q, z) = (row(ws.q, r, da), row(ws.z, r, da));
        for (h, (q, z)) in q.chunks_exact(dh).zip(z.chunks_exact_mut(dh)).enumerate() {
            let g = cfg.kv_head(h);
            let mut max = kv.scores(layer, g, q, wide_q, ws.quant, scale, ws.scores, keys);
            let row_scores = &mut ws.scores[..keys];
            if s.wants(HookKind::AttnScores) {
                s.hook(HookKind::AttnScores, h, row_scores);
                max = softmax::max(row_scores);
            }
            // The softmax's division by the sum happens here for `hook_pattern`, else in the mix's
            // weights (the same operation on the same values).
            let mut sum = softmax::exp_shifted(row_scores, max);
            if s.wants(HookKind::Pattern) {
                softmax::normalize(row_scores, sum);
                s.hook(HookKind::Pattern, h, row_scores);
                sum = 1.0;
            }
            kv.mix(layer, g, row_scores, sum, z);
            s.hook(HookKind::Z, h, z);
        }
    });
}

/// `attn_out = z W_O + b_O` of every position, head by head where `hook_result` is asked for.
#[inline(always)]
fn output<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    w: &AttnWeights<'_>,
    ws: &mut Workspace<'_>,
    rows: Rows,
) {
    let (cfg, activations, n) = (s.cfg, s.act, rows.len());
    let (dh, dm, da) = (cfg.d_head, cfg.d_model, cfg.d_attn());
    let result = s.wants(HookKind::Result);
    if !result && batched(activations, n) {
        matmul_rows(&w.w_o, Some(&w.b_o), ws.z, n, ws.attn_out, dm);
    }
    rows.each(s, |s, r| {
        let attn_out = row(ws.attn_out, r, dm);
        let mut z = Input::new(row(ws.z, r, da), activations, ws.quant);
        if result {
            attn_out.iter_mut().for_each(|o| *o = 0.0);
            for h in 0..cfg.n_heads {
                z.dot_rows(&w.w_o, h * dh, dh, ws.head_out);
                s.hook(HookKind::Result, h, ws.head_out);
                attn_out
                    .iter_mut()
                    .zip(ws.head_out.iter())
                    .for_each(|(o, r)| *o += r);
            }
            w.b_o.add_to(attn_out);
        } else if !batched(activations, n) {
            project(&w.w_o, &w.b_o, &mut z, attn_out);
        }
        s.hook(HookKind::AttnOut, 0, attn_out);
    });
}
