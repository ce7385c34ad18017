//! Token and positional embedding: `resid = W_E[token] (+ W_pos[pos] or the sinusoids of pos)`; for
//! rotary models, the position's rotary angles.

use super::{Rows, Step};
use crate::config::Positional;
use crate::features;
use crate::hooks::{HookKind, Hooks};
use crate::math::rotary;
use crate::math::sinusoidal::sinusoidal;
use crate::tensors::{TensorId, TensorKind};
use crate::workspace::{row, Workspace};

/// Embeds `tokens` (one per row; a missing one is token 0) into the rows of `ws.resid`, and the rotary
/// angles of their positions into `ws.rot_sin`/`ws.rot_cos` (rotary models).
#[inline(always)]
pub(crate) fn forward<H: Hooks>(
    s: &mut Step<'_, '_, H>,
    tokens: &[u32],
    ws: &mut Workspace<'_>,
    rows: Rows,
) {
    rows.each(s, |s, r| {
        let token = tokens.get(r).copied().unwrap_or(0);
        embed(s, token as usize, ws, r);
        rotary_angles(s, ws, r);
    });
}

/// Writes the embedding of `token` at the step's position into row `r` of `ws.resid`, using that row
/// of `ws.normed` for the positional vector (`W_pos[pos]`, or [`sinusoidal`] computed on the fly;
/// a `W_pos` row no hook asks for is added straight from the table, the same bits). Shortformer models fire
/// `hook_pos_embed` too, but their positions enter through the per-layer `pos_Q`/`pos_K` tables, so a
/// write there has no effect.
fn embed<H: Hooks>(s: &mut Step<'_, '_, H>, token: usize, ws: &mut Workspace<'_>, r: usize) {
    let dm = s.cfg.d_model;
    let (resid, tmp) = (row(ws.resid, r, dm), row(ws.normed, r, dm));
    if let Some(w_e) = s.model.matrix(TensorId::global(TensorKind::WE)) {
        w_e.row_into(token, resid);
    }
    s.hook(HookKind::Embed, 0, resid);
    let positional = s.cfg.positional;
    match positional {
        Positional::Rotary { .. } => return,
        Positional::Sinusoidal if features::SINUSOIDAL => sinusoidal(s.pos, tmp),
        _ => {
            if let Some(w_pos) = s.model.matrix(TensorId::global(TensorKind::WPos)) {
                // Without a `hook_pos_embed` to show the row to, added in the same pass.
                if positional.adds_to_residual() && !s.wants(HookKind::PosEmbed) {
                    return w_pos.add_row_to(s.pos, resid);
                }
                w_pos.row_into(s.pos, tmp);
            }
        }
    }
    s.hook(HookKind::PosEmbed, 0, tmp);
    if positional.adds_to_residual() {
        crate::math::add(resid, tmp);
    }
}

/// The rotary sines and cosines of the step's position into row `r` of the workspace's (rotary models
/// only).
fn rotary_angles<H: Hooks>(s: &mut Step<'_, '_, H>, ws: &mut Workspace<'_>, r: usize) {
    if let (
        Positional::Rotary {
            dim,
            base,
            adjacent_pairs,
        },
        true,
    ) = (s.cfg.positional, features::ROTARY)
    {
        let (sin, cos) = (row(ws.rot_sin, r, dim), row(ws.rot_cos, r, dim));
        rotary::angles(s.pos, dim, base, adjacent_pairs, sin, cos);
    }
}
