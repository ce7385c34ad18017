//! The integer-only arithmetic's forward pass of one position ([`Activations::Integer`]), top to
//! bottom, every value an integer from the embedding lookup to the unembedding's sums (a matrix's
//! sums exact in `i32`: an int8 row's, or an int4 row's groups times their multipliers, [`units`]):
//!
//! - `resid = E[t] + P[pos]`, int16 at the plan's residual scale (each int8 row times its multiplier;
//!   no `P` with rotary or shortformer positions);
//! - each block: `x = int8(z M norm(resid))` (Q11 [`normalize`], then a multiplier and the position's
//!   [`zoom`] `z`), `q, k, v = int8(M (W x / z + b))` (shortformer: plus `M pos_Q[pos]`, `M
//!   pos_K[pos]`), rotary positions turning `q` and `k` by the plan's Q14 table ([`rotary`]), the keys
//!   and values into the int8 cache, per head `scores_j = M (q . k_j)` in Q11 (a query head reading
//!   its key/value head), `p = softmax(scores)` in Q15, `z = int8(z' (sum_j p_j v_j) / 2^15)` (at the
//!   values' scale over its own zoom `z'`), `resid += M (W_O z / z' + b_O)`; then the MLP: `pre =
//!   int16(M (W_in x / z + b_in))`, `post = f(pre)` by the plan's knots, `resid += M (W_out int8(z''
//!   M' post) / z'' + b_out)`; gated: `pre` from `W_gate`, `lin = int16(M W_in x / z)`, `post = f(pre)
//!   lin + b_in` (an exact `i32` product, then `b_in` as TransformerLens adds it);
//! - `logits = (W_U int8(z M norm(resid)) / z + b_U) factor`, the one float product.
//!
//! Hooks see every point's value dequantised (`q * scale`) in the `f32` workspace; a hook's write is
//! rounded back to the point's integers. Without hooks no float operation runs before the logits.
//! Not called here: the norms' `hook_scale` and `hook_result` (no such step).
//!
//! [`Activations::Integer`]: crate::blob::Activations::Integer

use crate::blob::{quads, DType};
use crate::components::Step;
use crate::config::{Normalization, Positional};
use crate::error::{Error, Inconsistency};
use crate::hooks::{HookKind, Hooks};
use crate::integer::norm::{normalize, OUTPUT_FRAC_BITS};
use crate::integer::plan::{LayerPlan, Norm, Plan, Rows};
use crate::integer::requantize::{saturate_i16, saturate_i8, Multiplier};
use crate::integer::rotary;
use crate::integer::softmax::{softmax_in_place, PROB_FRAC_BITS};
use crate::integer::units::{self, Units};
use crate::integer::zoom::{max_abs, zoom, Zoom};
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

/// A matrix of the model: int8 (one scale per row), or int4 with its groups' multipliers from the
/// plan ([`Units`]; its values at the row's unit are `w u_g`).
struct Weights<'a> {
    m: Matrix<'a>,
    units: Units<'a>,
}

impl Weights<'_> {
    fn rows(&self) -> usize {
        self.m.rows()
    }

    /// Int4 (never in a build without `weights-i4`, whose code then has no int4 path).
    fn int4(&self) -> bool {
        DType::I4.compiled() && self.m.dtype() == DType::I4
    }
}

/// The matrix `kind` of block `s.layer`, with its shape (and, int4, its groups' multipliers). Out of
/// line: the lookup's frame is not part of its callers'.
#[inline(never)]
fn matrix<'a>(s: &Step<'_, 'a, impl Hooks>, kind: TensorKind) -> Result<Weights<'a>, Error> {
    let id = TensorId::in_layer(kind, s.layer);
    let mut w = Weights {
        m: s.model.matrix(id).ok_or(MISSING)?,
        units: Units::new(&[], 0),
    };
    if let (true, Some(plan)) = (w.int4(), s.model.integer_plan()) {
        w.units = plan.units(&s.cfg, id);
    }
    Ok(w)
}

/// `out[r] = W[r] . x` over `W`'s rows, exact (`x` its first `cols` values, `scratch` for their
/// lanes; int4: `sum_g u_g W[r][g] . x[g]`, [`units::sums`]); returns the outputs written.
#[inline(always)]
fn sums<'o>(w: &Weights<'_>, x: &[i8], scratch: &mut [u32], out: &'o mut [i32]) -> &'o mut [i32] {
    let (rows, cols) = (w.m.rows(), w.m.cols());
    if w.int4() {
        return units::sums(w.m.data(), [rows, cols], &w.units, x, out);
    }
    let x = &x[..cols.min(x.len())];
    let l = lanes(x, scratch);
    let n = rows.min(out.len());
    let out = &mut out[..n];
    matvec(w.m.data(), [rows, cols], x, l, out);
    out
}

/// `out[r] = rows[r]((W x) >> zoom)` over `W`'s rows: the exact sums of an input zoomed by `2^zoom`,
/// requantised ([`Rows::apply`]).
fn project(
    w: &Weights<'_>,
    rows: Rows<'_>,
    (x, zoom): (&[i8], Zoom),
    scratch: &mut [u32],
    out: &mut [i32],
) {
    rows.apply(sums(w, x, scratch, out), zoom);
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
    let e = normed_input(s, &tail.ln_final, HookKind::LnFinalNormalized, ws, ib);
    let acc = sums(&matrix(s, TensorKind::WU)?, ib.x, ib.lanes, ib.acc);
    let logits = row(ws.logits, r, s.cfg.d_vocab_out);
    for (i, (o, &a)) in logits.iter_mut().zip(acc.iter()).enumerate() {
        *o = tail.logit(i, e.back(a));
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
    let e = normed_input(s, &mp.ln2(), HookKind::Ln2Normalized, ws, ib);
    let linear = mp.linear();
    let pre_kind = match linear {
        Some(_) => TensorKind::WGate,
        None => TensorKind::WIn,
    };
    let (w_pre, w_out) = (matrix(s, pre_kind)?, matrix(s, TensorKind::WOut)?);
    let d_mlp = w_pre.rows();
    project(&w_pre, mp.w_pre(), (ib.x, e), ib.lanes, ib.acc);
    let pre = &mut ib.acc[..d_mlp];
    for v in pre.iter_mut() {
        *v = saturate_i16(*v).into();
    }
    hook(s, HookKind::MlpPre, 0, pre, mp.s_pre(), ws.mlp);
    match linear {
        Some((s_lin, rows)) => {
            let hidden = ib.hidden.get_mut(..d_mlp).ok_or(MISSING)?;
            for (h, &v) in hidden.iter_mut().zip(ib.acc.iter()) {
                *h = saturate_i16(v);
            }
            let lin = sums(&matrix(s, TensorKind::WIn)?, ib.x, ib.lanes, ib.acc);
            for (r, v) in lin.iter_mut().enumerate() {
                let acc = e.back(*v);
                *v = saturate_i16(rows.get(r).to_out.apply(acc)).into();
            }
            hook(s, HookKind::MlpPreLinear, 0, lin, s_lin, ws.gate);
            // |f(pre) lin| <= 2^30 (both int16, whatever a hook wrote): exact; then `b_in`, which
            // TransformerLens adds after the product.
            for (r, (v, &h)) in lin.iter_mut().zip(hidden.iter()).enumerate() {
                let product = i32::from(saturate_i16(*v)) * i32::from(mp.activate(h));
                *v = product.saturating_add(rows.get(r).bias);
            }
        }
        None => {
            for v in pre.iter_mut() {
                *v = mp.activate(saturate_i16(*v)).into();
            }
        }
    }
    let post = &mut ib.acc[..d_mlp];
    if s.wants(HookKind::MlpPost) {
        // Gated: `f(pre) lin` at the product of their scales.
        let scale = mp.s_post() * linear.map_or(1.0, |(s_lin, _)| s_lin);
        hook_view(s, HookKind::MlpPost, 0, post, scale, ws.mlp);
    }
    let e = zoom(mp.post_to_x(), max_abs(post));
    let to_x = e.input(mp.post_to_x());
    for (x, &v) in ib.x.iter_mut().zip(post.iter()) {
        *x = saturate_i8(to_x.apply(v));
    }
    project(&w_out, mp.w_out(), (&ib.x[..d_mlp], e), ib.lanes, ib.acc);
    add_to_resid(s, HookKind::MlpOut, plan.s_resid(), ws, ib);
    Ok(())
}

/// `f(o, m w[r][c])` for each column `c` of row `r` of the matrix `w` (int4: `w u_g`) and `o =
/// out[c]`.
fn each_in_row<T>(
    w: &Weights<'_>,
    r: usize,
    m: Multiplier,
    out: &mut [T],
    f: impl Fn(&mut T, i32),
) {
    let (rows, cols, data) = (w.m.rows(), w.m.cols(), w.m.data());
    let out = out.iter_mut().enumerate().take(cols);
    if w.int4() {
        for (c, o) in out {
            f(o, m.apply(units::value(data, cols, &w.units, r, c)));
        }
        return;
    }
    let place = quads::row_place(rows, cols, r);
    for (c, o) in out {
        let q = data.get(place.at(cols, c)).map_or(0, |&b| b as i8);
        f(o, m.apply(q.into()));
    }
}

/// Row `r` of the matrix `w` times `m`, into `out` (saturated to int16).
fn row_i16(w: &Weights<'_>, r: usize, m: Multiplier, out: &mut [i16]) {
    each_in_row(w, r, m, out, |o, v| *o = saturate_i16(v));
}

/// `resid = E[token] + P[pos]` (each row and the sum saturated to int16), with `hook_embed` and
/// `hook_pos_embed` (rotary positions: `resid = E[token]`).
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
    if !matches!(s.cfg.positional, Positional::Standard) {
        return Ok(());
    }
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
/// `hook_normalized`), then requantised, zoomed by the returned `e` ([`zoom`]); without norms the
/// residual requantised.
fn normed_input<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    n: &Norm,
    kind: HookKind,
    ws: &mut Workspace<'_>,
    ib: &mut IntegerBuffers<'_>,
) -> Zoom {
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
    let e = zoom(n.to_x, max_abs(src));
    let to_x = e.input(n.to_x);
    for (x, &v) in ib.x.iter_mut().zip(src) {
        *x = saturate_i8(to_x.apply(v.into()));
    }
    e
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

/// `out = int8(rows(W x))` for the matrix `kind` of block `s.layer` (`W_Q`, `W_K` or `W_V`; `x` zoomed
/// by `zoom`), with shortformer positions plus `m` times row `s.pos` of `pos_Q` or `pos_K`
/// (`positional`), each head through `hook_kind` (at `scale`, viewed in `view`).
#[inline(never)]
fn project_i8<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    (kind, rows, scale, hook_kind): (TensorKind, Rows<'_>, f32, HookKind),
    (x, zoom, lanes, acc): (&[i8], Zoom, &mut [u32], &mut [i32]),
    positional: Option<(TensorKind, Multiplier)>,
    (out, view): (&mut [i8], &mut [f32]),
) -> Result<(), Error> {
    let w = matrix(s, kind)?;
    project(&w, rows, (x, zoom), lanes, acc);
    if let (Some(table), true) = (positional, crate::features::SHORTFORMER) {
        add_positional(s, table, &mut acc[..w.rows()])?;
    }
    let out = out.get_mut(..w.rows()).ok_or(MISSING)?;
    for (o, &a) in out.iter_mut().zip(acc.iter()) {
        *o = saturate_i8(a);
    }
    per_head(s, hook_kind, out, scale, view);
    Ok(())
}

/// Shortformer positions: `out += m pos[s.pos]` for the table `pos_Q` or `pos_K` (`table`).
#[inline(never)]
fn add_positional<H: Hooks>(
    s: &Step<'_, '_, H>,
    (table, m): (TensorKind, Multiplier),
    out: &mut [i32],
) -> Result<(), Error> {
    let add = |o: &mut i32, v: i32| *o = o.saturating_add(v);
    each_in_row(&matrix(s, table)?, s.pos, m, out, add);
    Ok(())
}

/// `kind`'s hook on each head of `x` (at `scale`, viewed in `view`).
fn per_head<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    kind: HookKind,
    x: &mut [i8],
    scale: f32,
    view: &mut [f32],
) {
    if s.wants(kind) {
        for (h, head) in x.chunks_exact_mut(s.cfg.d_head).enumerate() {
            hook(s, kind, h, head, scale, view);
        }
    }
}

/// Rotary positions: every head of `x` (the queries or the keys at `s.pos`) turned by the plan's
/// angles, then `kind`'s hook (`hook_rot_q` or `hook_rot_k`). Nothing for other positions.
#[inline(never)]
fn rotate<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    plan: &Plan<'_>,
    (x, kind, scale): (&mut [i8], HookKind, f32),
    view: &mut [f32],
) {
    let (cfg, pos) = (s.cfg, s.pos);
    if let (
        Positional::Rotary {
            dim,
            adjacent_pairs,
            ..
        },
        true,
    ) = (cfg.positional, crate::features::ROTARY)
    {
        rotary::rotate_heads(x, cfg.d_head, dim, adjacent_pairs, |k| {
            plan.rotary(&cfg, pos, k)
        });
        per_head(s, kind, x, scale, view);
    }
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
    let e = normed_input(s, &lp.ln1(), HookKind::Ln1Normalized, ws, ib);
    let (d_kv, pos) = (s.cfg.d_kv(), s.pos);
    let (keys, values) = kv.integer_layer(s.layer).ok_or(MISSING)?;
    let (keys, values) = (
        keys.get_mut(..(pos + 1) * d_kv).ok_or(MISSING)?,
        values.get_mut(..(pos + 1) * d_kv).ok_or(MISSING)?,
    );
    let q = (TensorKind::WQ, lp.w_q(), lp.s_q(), HookKind::Q);
    let [pos_q, pos_k] = match s.cfg.positional {
        Positional::Shortformer => lp.positional(pos).map(Some),
        _ => [None; 2],
    };
    let q_pos = pos_q.map(|m| (TensorKind::PosQ, m));
    let inputs = (&*ib.x, e, &mut *ib.lanes, &mut *ib.acc);
    project_i8(s, q, inputs, q_pos, (ib.q, ws.q))?;
    let k = (TensorKind::WK, lp.w_k(), lp.s_k(), HookKind::K);
    let k_pos = pos_k.map(|m| (TensorKind::PosK, m));
    let inputs = (&*ib.x, e, &mut *ib.lanes, &mut *ib.acc);
    project_i8(s, k, inputs, k_pos, (&mut keys[pos * d_kv..], ws.q))?;
    let v = (TensorKind::WV, lp.w_v(), lp.s_v(), HookKind::V);
    let inputs = (&*ib.x, e, &mut *ib.lanes, &mut *ib.acc);
    project_i8(s, v, inputs, None, (&mut values[pos * d_kv..], ws.q))?;
    let d_attn = s.cfg.d_attn();
    rotate(
        s,
        plan,
        (&mut ib.q[..d_attn], HookKind::RotQ, lp.s_q()),
        ws.q,
    );
    rotate(
        s,
        plan,
        (&mut keys[pos * d_kv..], HookKind::RotK, lp.s_k()),
        ws.q,
    );
    for h in 0..s.cfg.n_heads {
        head(s, &lp, h, (keys, values), ws, ib);
    }
    let e = mixed_values(s, &lp, ws, ib);
    let w_o = matrix(s, TensorKind::WO)?;
    project(&w_o, lp.w_o(), (ib.x, e), ib.lanes, ib.acc);
    add_to_resid(s, HookKind::AttnOut, plan.s_resid(), ws, ib);
    Ok(())
}

/// `z`, `W_O`'s int8 input, into `ib.x` from every head's sums `sum_j p_j v_j` in `ib.acc` (the
/// values' scale `s_v` times `2^15`): `z = (sums / 2^15) z_e` at `s_v / z_e`, zoomed by the returned
/// `z_e` ([`zoom`]), each head through `hook_z`.
#[inline(never)]
fn mixed_values<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    lp: &LayerPlan<'_>,
    ws: &mut Workspace<'_>,
    ib: &mut IntegerBuffers<'_>,
) -> Zoom {
    let d_attn = s.cfg.d_attn();
    let sums = &ib.acc[..d_attn];
    // 2^-15: 2^30 2^(-14 - 31).
    let unit = Multiplier {
        m: 1 << 30,
        shift: 1 - PROB_FRAC_BITS as i32,
    };
    let e = zoom(unit, max_abs(sums));
    let to_z = e.input(unit);
    for (z, &a) in ib.x.iter_mut().zip(sums) {
        *z = saturate_i8(to_z.apply(a));
    }
    if s.wants(HookKind::Z) {
        let scale = lp.s_v() * e.factor();
        per_head(s, HookKind::Z, &mut ib.x[..d_attn], scale, ws.z);
    }
    e
}

/// Head `h` at `s.pos` over the cache's `keys` and `values` (`[pos][d_kv]`, this one's last):
/// `scores_j = M (q . k_j)` in Q11, their softmax in Q15, then `sum_j p_j v_j` into the head's place
/// in `ib.acc` ([`mixed_values`] makes `z` of them).
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
    let Some(sums) = ib.acc.get_mut(h * dh..(h + 1) * dh) else {
        return;
    };
    let values_of_head: &[u8] = bytemuck::cast_slice(values.get(span.start..).unwrap_or(&[]));
    weighted_rows(values_of_head, d_kv, scores, sums);
}
