//! The int8 roundings of a W8A8 model emulated one at a time on any model, through hooks ("fake
//! quantisation"): each chosen activation is rounded to int8 and back exactly as the core rounds it
//! (the core's per-token quantisation, one scale per token, per head for queries and the KV cache), and the
//! rest of the forward pass stays in the model's own arithmetic. Run on the `f32` model, it measures what
//! each rounding costs with exact weights, which no choice of weights can undo.
//!
//! A rounded matrix input `x~ = x + e` is emulated at the matrix's output: `y += W e` (the projection
//! read `x`; it must read `x~`), so the residual stream itself keeps `x`, as on the device.

use microlens::config::Positional;
use microlens::encode;
use microlens::weights::Matrix;
use microlens::{HookKind, HookPoint, Hooks, Model, TensorId, TensorKind};

/// One kind of int8 rounding a W8A8 model makes at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Int8Rounding {
    /// Every matrix input, per token: the attention and MLP inputs, `z` before `W_O`, the MLP hidden
    /// activation before `W_out`, the final residual before `W_U`.
    Inputs,
    /// Each head's query before its scores against the int8 keys.
    Queries,
    /// The keys stored in the KV cache, per position and head.
    Keys,
    /// The values stored in the KV cache, per position and head.
    Values,
}

impl Int8Rounding {
    /// Every rounding, in the order a forward step meets them.
    pub const ALL: [Int8Rounding; 4] = [
        Int8Rounding::Inputs,
        Int8Rounding::Queries,
        Int8Rounding::Keys,
        Int8Rounding::Values,
    ];

    /// A short lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            Int8Rounding::Inputs => "inputs",
            Int8Rounding::Queries => "queries",
            Int8Rounding::Keys => "keys",
            Int8Rounding::Values => "values",
        }
    }
}

/// `x` rounded to int8 and back as the device rounds a matrix input ([`encode::round_trip`]).
pub fn round_trip(x: &mut [f32], centred: bool) {
    let mut scratch = vec![0i8; x.len()];
    encode::round_trip(x, centred, &mut scratch);
}

/// `x` rounded to int8 with one scale and back ([`round_trip`], not centred).
fn fake_quantize(x: &mut [f32]) {
    round_trip(x, false);
}

/// `out[r] += W[r][c0 ..] . (x~ - x)` for the rows `rows` of `w`, `x~` the int8 rounding of `x`
/// (`centred` as in [`round_trip`]).
fn add_input_error(
    w: Option<Matrix<'_>>,
    x: &[f32],
    centred: bool,
    rows: core::ops::Range<usize>,
    out: &mut [f32],
) {
    let Some(w) = w else { return };
    let mut e = x.to_vec();
    round_trip(&mut e, centred);
    e.iter_mut().zip(x).for_each(|(e, x)| *e -= x);
    for (o, r) in out.iter_mut().zip(rows) {
        *o += w.dot(r, 0, &e);
    }
}

/// Hooks that apply the chosen [`Int8Rounding`]s to a model's forward pass.
#[derive(Clone, Debug)]
pub struct Int8Emulation<'m, 'b> {
    model: &'m Model<'b>,
    roundings: Vec<Int8Rounding>,
    rotary: bool,
    d_head: usize,
    /// Per position (a run of positions meets the hooks layer by layer, each position's points in
    /// its own order): the vector its next matrix reads (the block input, the MLP input or the final
    /// residual).
    input: Vec<Vec<f32>>,
    /// Per position, `z` of every head, `[n_heads * d_head]`.
    z: Vec<Vec<f32>>,
    /// Per position, the MLP's activated hidden vector.
    hidden: Vec<Vec<f32>>,
    /// `n_heads * d_head`.
    d_attn: usize,
}

/// The slot of position `pos` in `per_pos`, created empty (or `len` zeros) if new.
fn slot(per_pos: &mut Vec<Vec<f32>>, pos: usize, len: usize) -> &mut Vec<f32> {
    if per_pos.len() <= pos {
        per_pos.resize(pos + 1, vec![0.0; len]);
    }
    &mut per_pos[pos]
}

impl<'m, 'b> Int8Emulation<'m, 'b> {
    /// Emulates `roundings` on `model`.
    pub fn new(model: &'m Model<'b>, roundings: &[Int8Rounding]) -> Self {
        let cfg = model.config();
        Int8Emulation {
            model,
            roundings: roundings.to_vec(),
            rotary: matches!(cfg.positional, Positional::Rotary { .. }),
            d_head: cfg.d_head,
            input: Vec::new(),
            z: Vec::new(),
            hidden: Vec::new(),
            d_attn: cfg.n_heads * cfg.d_head,
        }
    }

    fn on(&self, r: Int8Rounding) -> bool {
        self.roundings.contains(&r)
    }

    fn matrix(&self, kind: TensorKind, layer: usize) -> Option<Matrix<'b>> {
        let id = if TensorKind::per_layer(kind) {
            TensorId::layer(kind, layer)
        } else {
            TensorId::global(kind)
        };
        self.model.matrix(id)
    }

    /// The input error of `kind` at `layer` added to the rows `rows` of its output `act`.
    fn input_error(
        &self,
        kind: TensorKind,
        layer: usize,
        x: &[f32],
        first_row: usize,
        act: &mut [f32],
    ) {
        if self.on(Int8Rounding::Inputs) {
            let rows = first_row..first_row + act.len();
            let centred = kind == TensorKind::WOut;
            add_input_error(self.matrix(kind, layer), x, centred, rows, act);
        }
    }
}

impl Hooks for Int8Emulation<'_, '_> {
    fn wants(&self, kind: HookKind) -> bool {
        !self.roundings.is_empty()
            && !matches!(
                kind,
                HookKind::Result | HookKind::AttnScores | HookKind::Pattern
            )
    }

    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        let (l, head_rows, pos, d_attn) = (p.layer, p.head * self.d_head, p.pos, self.d_attn);
        match p.kind {
            // The last of these before a matrix is what it reads (the norm's output for normed models).
            HookKind::ResidPre
            | HookKind::Ln1Normalized
            | HookKind::ResidMid
            | HookKind::Ln2Normalized
            | HookKind::ResidPost
            | HookKind::LnFinalNormalized => *slot(&mut self.input, pos, 0) = act.to_vec(),
            HookKind::Q | HookKind::K | HookKind::V => {
                let (kind, rounding) = match p.kind {
                    HookKind::Q => (TensorKind::WQ, Int8Rounding::Queries),
                    HookKind::K => (TensorKind::WK, Int8Rounding::Keys),
                    _ => (TensorKind::WV, Int8Rounding::Values),
                };
                let x = core::mem::take(slot(&mut self.input, pos, 0));
                self.input_error(kind, l, &x, head_rows, act);
                self.input[pos] = x;
                let rotated_later = self.rotary && p.kind != HookKind::V;
                if self.on(rounding) && !rotated_later {
                    fake_quantize(act);
                }
            }
            HookKind::RotQ if self.on(Int8Rounding::Queries) => fake_quantize(act),
            HookKind::RotK if self.on(Int8Rounding::Keys) => fake_quantize(act),
            HookKind::Z => slot(&mut self.z, pos, d_attn)[head_rows..head_rows + act.len()]
                .copy_from_slice(act),
            HookKind::AttnOut => {
                let z = slot(&mut self.z, pos, d_attn).clone();
                self.input_error(TensorKind::WO, l, &z, 0, act)
            }
            HookKind::MlpPre | HookKind::MlpPreLinear => {
                // A gated MLP's `hook_pre` is `W_gate`'s output, `hook_pre_linear` `W_in`'s.
                let kind = match (p.kind, self.model.config().gated_mlp) {
                    (HookKind::MlpPre, true) => TensorKind::WGate,
                    _ => TensorKind::WIn,
                };
                let x = core::mem::take(slot(&mut self.input, pos, 0));
                self.input_error(kind, l, &x, 0, act);
                self.input[pos] = x;
            }
            HookKind::MlpPost => *slot(&mut self.hidden, pos, 0) = act.to_vec(),
            HookKind::MlpOut => {
                let hidden = slot(&mut self.hidden, pos, 0).clone();
                self.input_error(TensorKind::WOut, l, &hidden, 0, act)
            }
            HookKind::Logits => {
                let x = core::mem::take(slot(&mut self.input, pos, 0));
                self.input_error(TensorKind::WU, 0, &x, 0, act);
                self.input[pos] = x;
            }
            _ => {}
        }
    }
}
