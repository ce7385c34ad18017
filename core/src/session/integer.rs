//! The integer-only arithmetic's forward pass of one position ([`Activations::Integer`]), top to
//! bottom, every value an integer from the embedding lookup to the unembedding's sums:
//!
//! - `resid = E[t] + P[pos]`, int16 at the plan's residual scale (each int8 row times its multiplier);
//! - each block: `x = int8(norm(resid))` (Q11 [`normalize`], then a multiplier), `q, k, v = int8(M (W
//!   x + b))`, the keys and values into the int8 cache, per head `scores_j = M (q . k_j)` in Q11,
//!   `p = softmax(scores)` in Q15, `z = (sum_j p_j v_j) >> 15` (int8 at the values' scale), `resid +=
//!   M (W_O z + b_O)`; then the MLP: `pre = int16(M (W_in x + b_in))`, `post = f(pre)` by the plan's
//!   knots, `resid += M (W_out int8(post) + b_out)`;
//! - `logits = (W_U int8(norm(resid)) + b_U) factor`, the one float product.
//!
//! Hooks see every point's value dequantised (`q * scale`) in the `f32` workspace; a hook's write is
//! rounded back to the point's integers. Without hooks no float operation runs before the logits.
//! Not called here: the norms' `hook_scale`, `hook_result` and the rotary hooks (no such step).
//!
//! [`Activations::Integer`]: crate::blob::Activations::Integer

use crate::blob::quads;
use crate::components::Step;
use crate::config::Normalization;
use crate::error::{Error, Inconsistency};
use crate::hooks::{HookKind, Hooks};
use crate::integer::norm::{normalize, OUTPUT_FRAC_BITS};
use crate::integer::plan::{LayerPlan, Norm, Plan, Rows};
use crate::integer::requantize::{rounding_shift_right, saturate_i16, saturate_i8, Multiplier};
use crate::integer::softmax::{softmax_in_place, PROB_FRAC_BITS};
use crate::kv_cache::KvCache;
use crate::quant::exact::{lanes, matvec, strided, weighted_rows};
use crate::tensors::{TensorId, TensorKind};
use crate::weights::Matrix;
use crate::workspace::{row, IntegerBuffers, Workspace};

const MISSING: Error = Error::Inconsistent(Inconsistency::MissingTensor);

/// An integer a hook sees as `value * scale`.
trait Int: Copy {
    fn real(self) -> f32;
    fn from_real(x: f32) -> Self;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            #[inline(always)]
            fn real(self) -> f32 {
                self as f32
            }
            #[inline(always)]
            fn from_real(x: f32) -> Self {
                // `as` saturates (and sends NaN to 0).
                libm::roundf(x) as $t
            }
        }
    )*};
}
int!(i8, i16, i32);

/// Calls the hooks at `kind` and `head` on `vals` dequantised into `view`, then rounds what they
/// left there back into `vals`. Nothing (no float operation) unless a hook wants `kind`.
#[inline(always)]
fn hook<H: Hooks, T: Int>(
    s: &mut Step<'_, '_, H>,
    kind: HookKind,
    head: usize,
    vals: &mut [T],
    scale: f32,
    view: &mut [f32],
) {
    if s.wants(kind) {
        hook_view(s, kind, head, vals, scale, view);
    }
}

/// [`hook`]'s work, out of line: its frame is only on the stack while a hook runs.
#[inline(never)]
fn hook_view<H: Hooks, T: Int>(
    s: &mut Step<'_, '_, H>,
    kind: HookKind,
    head: usize,
    vals: &mut [T],
    scale: f32,
    view: &mut [f32],
) {
    let n = vals.len().min(view.len());
    let view = &mut view[..n];
    for (f, q) in view.iter_mut().zip(vals.iter()) {
        *f = q.real() * scale;
    }
    s.hook(kind, head, view);
    for (q, f) in vals.iter_mut().zip(view.iter()) {
        *q = T::from_real(*f / scale);
    }
}

/// `2^-bits`, the scale of a fixed-point value with `bits` fraction bits.
fn fixed(bits: u32) -> f32 {
    f32::from_bits((127 - bits) << 23)
}

/// An int8 matrix of the model, with its shape.
fn matrix<'a>(s: &Step<'_, 'a, impl Hooks>, kind: TensorKind) -> Result<Matrix<'a>, Error> {
    s.model
        .matrix(TensorId::in_layer(kind, s.layer))
        .ok_or(MISSING)
}

/// `out[r] = W[r] . x` over `W`'s rows, exact (`x` its first `cols` values, `scratch` for their
/// lanes); returns the outputs written.
fn sums<'o>(w: &Matrix<'_>, x: &[i8], scratch: &mut [u32], out: &'o mut [i32]) -> &'o mut [i32] {
    let x = &x[..w.cols().min(x.len())];
    let l = lanes(x, scratch);
    let n = w.rows().min(out.len());
    let out = &mut out[..n];
    matvec(w.data(), [w.rows(), w.cols()], x, l, out);
    out
}

/// `out[r] = rows[r](W x)` over `W`'s rows: the exact sums, requantised.
fn project(w: &Matrix<'_>, rows: Rows<'_>, x: &[i8], scratch: &mut [u32], out: &mut [i32]) {
    rows.apply(sums(w, x, scratch, out));
}

/// The forward pass of `token` at `s.pos`, its logits into row `r` of `ws.logits`.
#[inline(never)]
pub(crate) fn forward<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    plan: &Plan<'_>,
    token: usize,
    ws: &mut Workspace<'_>,
    ib: &mut IntegerBuffers<'_>,
    kv: &mut KvCache<'_>,
    r: usize,
) -> Result<(), Error> {
    let s_r = plan.s_resid();
    embed(s, plan, token, ws, ib)?;
    for layer in 0..s.cfg.n_layers {
        s.layer = layer;
        hook(s, HookKind::ResidPre, 0, ib.resid, s_r, ws.resid);
        attention(s, plan, ws, ib, kv)?;
        if !s.cfg.attn_only() {
            hook(s, HookKind::ResidMid, 0, ib.resid, s_r, ws.resid);
            mlp(s, plan, ws, ib)?;
        }
        hook(s, HookKind::ResidPost, 0, ib.resid, s_r, ws.resid);
    }
    unembed(s, plan, ws, ib, r)
}

/// `ws.logits` row `r` from the residual stream: the final norm, `W_U`'s exact sums, then each logit's
/// one float product.
#[inline(never)]
fn unembed<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    plan: &Plan<'_>,
    ws: &mut Workspace<'_>,
    ib: &mut IntegerBuffers<'_>,
    r: usize,
) -> Result<(), Error> {
    let tail = plan.tail(&s.cfg);
    normed_input(s, &tail.ln_final, HookKind::LnFinalNormalized, ws, ib);
    let acc = sums(&matrix(s, TensorKind::WU)?, ib.x, ib.lanes, ib.acc);
    let logits = row(ws.logits, r, s.cfg.d_vocab_out);
    for (i, (o, &a)) in logits.iter_mut().zip(acc.iter()).enumerate() {
        *o = tail.logit(i, a);
    }
    s.hook(HookKind::Logits, 0, logits);
    Ok(())
}

/// The MLP of block `s.layer`, added to the residual stream.
#[inline(never)]
fn mlp<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    plan: &Plan<'_>,
    ws: &mut Workspace<'_>,
    ib: &mut IntegerBuffers<'_>,
) -> Result<(), Error> {
    let Some(mp) = plan.layer(&s.cfg, s.layer).mlp() else {
        return Err(MISSING);
    };
    normed_input(s, &mp.ln2(), HookKind::Ln2Normalized, ws, ib);
    let (w_in, w_out) = (matrix(s, TensorKind::WIn)?, matrix(s, TensorKind::WOut)?);
    let d_mlp = w_in.rows();
    project(&w_in, mp.w_in(), ib.x, ib.lanes, ib.acc);
    let pre = &mut ib.acc[..d_mlp];
    for v in pre.iter_mut() {
        *v = saturate_i16(*v).into();
    }
    hook(s, HookKind::MlpPre, 0, pre, mp.s_pre(), ws.mlp);
    for v in pre.iter_mut() {
        *v = mp.activate(saturate_i16(*v)).into();
    }
    hook(s, HookKind::MlpPost, 0, pre, mp.s_post(), ws.mlp);
    let to_x = mp.post_to_x();
    for (x, &v) in ib.x.iter_mut().zip(pre.iter()) {
        *x = saturate_i8(to_x.apply(v));
    }
    project(&w_out, mp.w_out(), &ib.x[..d_mlp], ib.lanes, ib.acc);
    add_to_resid(s, HookKind::MlpOut, plan.s_resid(), ws, ib);
    Ok(())
}

/// Row `r` of the int8 matrix `w` times `m`, into `out` (saturated to int16).
fn row_i16(w: &Matrix<'_>, r: usize, m: Multiplier, out: &mut [i16]) {
    let (rows, cols) = (w.rows(), w.cols());
    let place = quads::row_place(rows, cols, r);
    for (c, o) in out.iter_mut().enumerate().take(cols) {
        let q = w.data().get(place.at(cols, c)).map_or(0, |&b| b as i8);
        *o = saturate_i16(m.apply(q.into()));
    }
}

/// `resid = E[token] + P[pos]` (each row and the sum saturated to int16), with `hook_embed` and
/// `hook_pos_embed`.
#[inline(never)]
fn embed<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    plan: &Plan<'_>,
    token: usize,
    ws: &mut Workspace<'_>,
    ib: &mut IntegerBuffers<'_>,
) -> Result<(), Error> {
    let s_r = plan.s_resid();
    row_i16(
        &matrix(s, TensorKind::WE)?,
        token,
        plan.embed(token),
        ib.resid,
    );
    hook(s, HookKind::Embed, 0, ib.resid, s_r, ws.resid);
    let pos = s.pos;
    row_i16(
        &matrix(s, TensorKind::WPos)?,
        pos,
        plan.pos_embed(&s.cfg, pos),
        ib.normed,
    );
    hook(s, HookKind::PosEmbed, 0, ib.normed, s_r, ws.normed);
    for (r, &p) in ib.resid.iter_mut().zip(ib.normed.iter()) {
        *r = r.saturating_add(p);
    }
    Ok(())
}

/// The next matmul's int8 input `ib.x` from the residual stream: normalised in Q11 (with the norm's
/// `hook_normalized`), then requantised; without norms the residual requantised.
fn normed_input<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    n: &Norm,
    kind: HookKind,
    ws: &mut Workspace<'_>,
    ib: &mut IntegerBuffers<'_>,
) {
    let norm = s.cfg.normalization;
    let src: &[i16] = match norm {
        Normalization::None => ib.resid,
        _ => {
            let centre = matches!(norm, Normalization::LN | Normalization::LNPre);
            // `normalize` refuses only widths the model check already refused.
            let _ = normalize(ib.resid, centre, n.eps_n2, ib.normed);
            hook(s, kind, 0, ib.normed, fixed(OUTPUT_FRAC_BITS), ws.normed);
            ib.normed
        }
    };
    for (x, &v) in ib.x.iter_mut().zip(src) {
        *x = saturate_i8(n.to_x.apply(v.into()));
    }
}

/// `ib.acc`'s requantised output (at the residual's scale) through `kind`'s hook, added to the
/// residual stream.
fn add_to_resid<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    kind: HookKind,
    s_r: f32,
    ws: &mut Workspace<'_>,
    ib: &mut IntegerBuffers<'_>,
) {
    let out = &mut ib.acc[..s.cfg.d_model];
    hook(s, kind, 0, out, s_r, ws.attn_out);
    for (r, &o) in ib.resid.iter_mut().zip(out.iter()) {
        *r = saturate_i16(i32::from(*r).saturating_add(o));
    }
}

/// `out = int8(rows(W x))` for the matrix `kind` of block `s.layer` (`W_Q`, `W_K` or `W_V`), each head
/// through `hook_kind` (at `scale`, viewed in `view`).
#[inline(never)]
fn project_i8<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    (kind, rows, scale, hook_kind): (TensorKind, Rows<'_>, f32, HookKind),
    (x, lanes, acc): (&[i8], &mut [u32], &mut [i32]),
    out: &mut [i8],
    view: &mut [f32],
) -> Result<(), Error> {
    let w = matrix(s, kind)?;
    project(&w, rows, x, lanes, acc);
    let out = out.get_mut(..w.rows()).ok_or(MISSING)?;
    for (o, &a) in out.iter_mut().zip(acc.iter()) {
        *o = saturate_i8(a);
    }
    if s.wants(hook_kind) {
        for (h, head) in out.chunks_exact_mut(s.cfg.d_head).enumerate() {
            hook(s, hook_kind, h, head, scale, view);
        }
    }
    Ok(())
}

/// Attention of block `s.layer` on the residual stream's `ln1`, added to it: the projections (the
/// keys and values straight into the cache), each head's scores, softmax and mix, the output; each out
/// of line, so that only one of their frames is on the stack at a time.
#[inline(never)]
fn attention<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    plan: &Plan<'_>,
    ws: &mut Workspace<'_>,
    ib: &mut IntegerBuffers<'_>,
    kv: &mut KvCache<'_>,
) -> Result<(), Error> {
    let lp = plan.layer(&s.cfg, s.layer);
    normed_input(s, &lp.ln1(), HookKind::Ln1Normalized, ws, ib);
    let (d_kv, pos) = (s.cfg.d_kv(), s.pos);
    let (keys, values) = kv.integer_layer(s.layer).ok_or(MISSING)?;
    let (keys, values) = (
        keys.get_mut(..(pos + 1) * d_kv).ok_or(MISSING)?,
        values.get_mut(..(pos + 1) * d_kv).ok_or(MISSING)?,
    );
    let q = (TensorKind::WQ, lp.w_q(), lp.s_q(), HookKind::Q);
    project_i8(s, q, (ib.x, ib.lanes, ib.acc), ib.q, ws.q)?;
    let k = (TensorKind::WK, lp.w_k(), lp.s_k(), HookKind::K);
    project_i8(
        s,
        k,
        (ib.x, ib.lanes, ib.acc),
        &mut keys[pos * d_kv..],
        ws.q,
    )?;
    let v = (TensorKind::WV, lp.w_v(), lp.s_v(), HookKind::V);
    project_i8(
        s,
        v,
        (ib.x, ib.lanes, ib.acc),
        &mut values[pos * d_kv..],
        ws.q,
    )?;
    for h in 0..s.cfg.n_heads {
        head(s, &lp, h, (keys, values), ws, ib);
    }
    let w_o = matrix(s, TensorKind::WO)?;
    project(&w_o, lp.w_o(), ib.x, ib.lanes, ib.acc);
    add_to_resid(s, HookKind::AttnOut, plan.s_resid(), ws, ib);
    Ok(())
}

/// Head `h` at `s.pos` over the cache's `keys` and `values` (`[pos][d_kv]`, this one's last):
/// `scores_j = M (q . k_j)` in Q11, their softmax in Q15, then `z = (sum_j p_j v_j) >> 15`.
#[inline(never)]
fn head<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    lp: &LayerPlan<'_>,
    h: usize,
    (keys, values): (&[i8], &[i8]),
    ws: &mut Workspace<'_>,
    ib: &mut IntegerBuffers<'_>,
) {
    let (dh, d_kv, g) = (s.cfg.d_head, s.cfg.d_kv(), s.cfg.kv_head(h));
    let span = g * dh..(g + 1) * dh;
    let q = &ib.q[h * dh..(h + 1) * dh];
    let scores = &mut ib.scores[..keys.len() / d_kv.max(1)];
    let keys_of_head: &[u8] = bytemuck::cast_slice(keys.get(span.start..).unwrap_or(&[]));
    strided(keys_of_head, d_kv, q, lanes(q, ib.lanes), scores);
    let score = lp.score();
    for sc in scores.iter_mut() {
        *sc = score.apply(*sc);
    }
    hook(
        s,
        HookKind::AttnScores,
        h,
        scores,
        fixed(OUTPUT_FRAC_BITS),
        ws.scores,
    );
    softmax_in_place(scores);
    hook(
        s,
        HookKind::Pattern,
        h,
        scores,
        fixed(PROB_FRAC_BITS),
        ws.scores,
    );
    // Probabilities sum to 2^15, so |sum| <= 2^22 unless a hook wrote others (then the sums wrap, as
    // integers do).
    let sums = &mut ib.acc[..dh];
    let values_of_head: &[u8] = bytemuck::cast_slice(values.get(span.start..).unwrap_or(&[]));
    weighted_rows(values_of_head, d_kv, scores, sums);
    // `z` in the input buffer, which the projections no longer need.
    let z = &mut ib.x[h * dh..(h + 1) * dh];
    for (z, &a) in z.iter_mut().zip(sums.iter()) {
        *z = saturate_i8(rounding_shift_right(a, PROB_FRAC_BITS));
    }
    hook(s, HookKind::Z, h, z, lp.s_v(), ws.z);
}
