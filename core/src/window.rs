//! A sliding context window: a [`Session`] that keeps running past its context.
//!
//! At every token `t` the logits are those of a fresh session over `tokens[max(0, t - W + 1) ..= t]` at
//! its last position, bit for bit (`W` the window's width, at most the session's context). Until the
//! window is full this is the session itself; after that, the window slides by one token per step:
//!
//! - [`WindowMode::ReEncode`] (every model): the session is reset and the last `W - 1` tokens are run
//!   again before the new one, `W` forward steps per token. Learned, shortformer and sinusoidal positions
//!   live in the residual stream, so every key and value depends on its position in the window; and in a
//!   model of two layers or more, the keys and values of layer 1 onwards depend on which tokens precede
//!   them in the window, so the cache of the last step cannot be reused (rotary models included).
//! - [`WindowMode::Restore`] (one-layer rotary models): the keys and values of layer 0 depend only on
//!   their token, and rotary positions enter only as rotations of queries and keys. The window keeps each
//!   token's unrotated key and its value (after the hooks) and, when it slides, rotates every key again
//!   at its new position in the window and stores it back into the KV cache: no forward step is repeated.
//!   The keys are rotated at window positions, not at absolute ones: rotated at absolute positions the
//!   scores are equal in exact arithmetic only (their angles round differently), and the logits would
//!   differ in their last bits.

use crate::config::{Config, Positional};
use crate::error::Error;
use crate::hooks::{HookKind, HookPoint, Hooks, COMPILED};
use crate::math::rotary;
use crate::session::Session;
use crate::workspace::row;

/// How a [`Window`] slides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WindowMode {
    /// Run the window's tokens again from position 0: `W` forward steps per token once it slides.
    ReEncode,
    /// Rotate the cached keys of a one-layer rotary model at their new positions: one forward step per
    /// token, plus `W - 1` key rotations.
    Restore,
}

impl WindowMode {
    /// The mode a model with `cfg` slides with: [`WindowMode::Restore`] for one-layer rotary models (when
    /// the build calls hooks at `hook_k` and `hook_v`, through which the window keeps the keys and values),
    /// else [`WindowMode::ReEncode`]. A blob of the integer-only arithmetic always re-encodes.
    pub const fn of(cfg: &Config) -> Self {
        let rotary = matches!(cfg.positional, Positional::Rotary { .. });
        if rotary && cfg.n_layers == 1 && RESTORE {
            WindowMode::Restore
        } else {
            WindowMode::ReEncode
        }
    }
}

/// Whether this build can restore (it calls hooks at `hook_k` and `hook_v`). A constant, so that a build
/// without them (a firmware's) has no code for it.
const RESTORE: bool = COMPILED.contains(HookKind::K) && COMPILED.contains(HookKind::V);

/// A session whose context slides over an unbounded token stream; see the module documentation.
#[derive(Debug)]
pub struct Window<'w, 'a, 'b> {
    session: &'w mut Session<'a, 'b>,
    /// The last `width` tokens, token `t` at `t % width`.
    tokens: &'w mut [u32],
    /// [`WindowMode::Restore`]: the last `width` tokens' unrotated keys then values of layer 0
    /// (`2 * d_kv` words each), token `t` at `t % width`.
    kept: &'w mut [f32],
    width: usize,
    seen: usize,
    mode: WindowMode,
}

impl<'w, 'a, 'b> Window<'w, 'a, 'b> {
    /// `f32` words of the keys and values buffer a window of `width` tokens needs for `cfg`: `2 * width *
    /// n_key_value_heads * d_head` in [`WindowMode::Restore`], 0 otherwise (saturating).
    pub const fn kept_len(cfg: &Config, width: usize) -> usize {
        match WindowMode::of(cfg) {
            WindowMode::Restore => width.saturating_mul(cfg.d_kv()).saturating_mul(2),
            WindowMode::ReEncode => 0,
        }
    }

    /// A window of `width` tokens (`1..=` the session's context) over `session`, which is reset. `tokens`
    /// holds the window's tokens (at least `width`), `kept` at least [`Window::kept_len`] words.
    pub fn new(
        session: &'w mut Session<'a, 'b>,
        width: usize,
        tokens: &'w mut [u32],
        kept: &'w mut [f32],
    ) -> Result<Self, Error> {
        if width == 0 || width > session.n_ctx() {
            return Err(Error::OutOfRange {
                what: "window width",
            });
        }
        let cfg = *session.model().config();
        let needed = Self::kept_len(&cfg, width);
        if kept.len() < needed {
            return Err(Error::BufferTooSmall {
                what: "window keys and values",
                needed,
                found: kept.len(),
            });
        }
        if tokens.len() < width {
            return Err(Error::BufferTooSmall {
                what: "window tokens",
                needed: width,
                found: tokens.len(),
            });
        }
        session.reset();
        // The integer-only arithmetic's cache holds int8 keys at the plan's scales: it re-encodes.
        let mode = match session.model().activations() {
            crate::blob::Activations::Integer => WindowMode::ReEncode,
            _ => WindowMode::of(&cfg),
        };
        Ok(Window {
            session,
            tokens,
            kept,
            width,
            seen: 0,
            mode,
        })
    }

    /// The width `W`.
    pub fn width(&self) -> usize {
        self.width
    }

    /// How the window slides.
    pub fn mode(&self) -> WindowMode {
        self.mode
    }

    /// Tokens consumed so far (the absolute position of the next one).
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// The session underneath (its state is the window's last step).
    pub fn session(&self) -> &Session<'a, 'b> {
        self.session
    }

    /// Forgets all tokens.
    pub fn reset(&mut self) {
        self.session.reset();
        self.seen = 0;
    }

    /// Consumes `token` and returns the logits of a fresh session over the window ending at it.
    pub fn step(&mut self, token: u32) -> Result<&[f32], Error> {
        self.step_with(token, &mut ())
    }

    /// [`Window::step`] with hooks. Positions are the window's (`0..W`). [`WindowMode::ReEncode`] calls
    /// `hooks` at every step of the fresh run over the window, as that run would; [`WindowMode::Restore`]
    /// at the new token's step only, and reuses the keys and values the hooks left at `hook_k` and
    /// `hook_v` (writes at `hook_rot_k` of earlier tokens are not kept).
    pub fn step_with<H: Hooks>(&mut self, token: u32, hooks: &mut H) -> Result<&[f32], Error> {
        let d_vocab = self.session.model().config().d_vocab;
        if token as usize >= d_vocab {
            return Err(Error::TokenOutOfRange { token, d_vocab });
        }
        let (t, w) = (self.seen, self.width);
        if let Some(slot) = self.tokens.get_mut(t % w) {
            *slot = token;
        }
        let sliding = t >= w;
        match (self.mode, sliding) {
            (WindowMode::ReEncode, true) => {
                self.session.reset();
                for p in 0..w - 1 {
                    let earlier = self.tokens.get((t - (w - 1) + p) % w).copied();
                    self.session.step_with(earlier.unwrap_or(0), hooks)?;
                }
            }
            (WindowMode::Restore, true) if RESTORE => self.restore(t),
            _ => {}
        }
        self.seen += 1;
        match self.mode {
            WindowMode::Restore if RESTORE => {
                let d_kv = self.session.model().config().d_kv();
                let at = (t % w) * 2 * d_kv;
                let kept = self.kept.get_mut(at..at + 2 * d_kv).unwrap_or(&mut []);
                let mut keep = Keep { kept, d_kv };
                self.session.step_with(token, &mut (hooks, &mut keep))
            }
            _ => self.session.step_with(token, hooks),
        }
    }

    /// [`WindowMode::Restore`] before token `t` (`t >= W`): the keys and values of tokens `t - W + 1 ..
    /// t` back into the KV cache at positions `0 .. W - 1`, keys rotated there; the session then steps at
    /// position `W - 1`.
    fn restore(&mut self, t: usize) {
        let w = self.width;
        let cfg = *self.session.model().config();
        let d_kv = cfg.d_kv();
        let Positional::Rotary {
            dim,
            base,
            adjacent_pairs,
        } = cfg.positional
        else {
            return;
        };
        let (ws, kv) = self.session.parts();
        for p in 0..w - 1 {
            let at = ((t - (w - 1) + p) % w) * 2 * d_kv;
            let Some(kept) = self.kept.get(at..at + 2 * d_kv) else {
                return;
            };
            let (k, v) = kept.split_at(d_kv);
            let (sin, cos) = (row(ws.rot_sin, 0, dim), row(ws.rot_cos, 0, dim));
            rotary::angles(p, dim, base, adjacent_pairs, sin, cos);
            let key = row(ws.k, 0, d_kv);
            key.iter_mut().zip(k).for_each(|(dst, src)| *dst = *src);
            rotary::rotate_heads(key, cfg.d_head, sin, cos, adjacent_pairs);
            kv.store(0, p, key, v);
        }
        self.session.set_pos(w - 1);
    }
}

/// Keeps layer 0's keys (before rotation) and values of the current token, as the hooks before it
/// left them: `kept = [k (d_kv) | v (d_kv)]`.
struct Keep<'k> {
    kept: &'k mut [f32],
    d_kv: usize,
}

impl Hooks for Keep<'_> {
    fn wants(&self, kind: HookKind) -> bool {
        matches!(kind, HookKind::K | HookKind::V)
    }

    fn hook(&mut self, point: HookPoint, act: &mut [f32]) {
        let side = match point.kind {
            HookKind::K => 0,
            HookKind::V => self.d_kv,
            _ => return,
        };
        if point.layer != 0 {
            return;
        }
        let at = side + point.head * act.len();
        if let Some(dst) = self.kept.get_mut(at..at + act.len()) {
            dst.copy_from_slice(act);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::math::rotary;

    /// `q` rotated at `a + gap` dotted with `k` rotated at `a`.
    fn score(q: &[f32; 8], k: &[f32; 8], a: usize, gap: usize) -> f32 {
        let (mut sin, mut cos) = ([0.0; 8], [0.0; 8]);
        let (mut q, mut k) = (*q, *k);
        rotary::angles(a + gap, 8, 10000.0, false, &mut sin, &mut cos);
        rotary::rotate(&mut q, &sin, &cos, false);
        rotary::angles(a, 8, 10000.0, false, &mut sin, &mut cos);
        rotary::rotate(&mut k, &sin, &cos, false);
        q.iter().zip(&k).map(|(a, b)| a * b).sum()
    }

    /// Why [`super::WindowMode::Restore`] rotates keys at window positions: at absolute positions the
    /// scores depend on the distance alone only in exact arithmetic.
    #[test]
    fn rotary_scores_at_absolute_positions_differ_in_their_bits() {
        let q = [0.3, -1.2, 0.7, 0.05, -0.4, 0.9, 1.1, -0.6];
        let k = [-0.8, 0.2, 0.6, -1.3, 0.45, 0.1, -0.7, 0.35];
        let at_zero = score(&q, &k, 0, 3);
        let shifted: usize = (1..200).filter(|&a| score(&q, &k, a, 3) != at_zero).count();
        assert!(shifted > 0);
        assert!((1..200).all(|a| (score(&q, &k, a, 3) - at_zero).abs() < 1e-4));
    }
}
