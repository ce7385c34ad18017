//! The integer plan: every constant the integer-only forward (`session::integer`) needs beyond the
//! int8 or int4 weights, computed on the host at conversion from ranges calibrated on the float
//! forward, and stored in the blob after the header (`convert --arith integer`).
//!
//! Little-endian 32-bit words, in forward order (`R` = a [`Row`], 3 words; `M` = a [`Multiplier`],
//! 2 words; `N` = a [`Norm`], 5 words; `f` = an `f32`'s bits, the scale a hook dequantises with):
//!
//! - head: `MAGIC`, `s_resid` (f), `W_E` rows `d_vocab x M` (int8 row -> residual), `W_pos` rows
//!   `n_ctx x M` (standard positions only), the rotary table `n_ctx x rotary_dim / 2` words (rotary
//!   positions only: `cos` in the low half, `sin` in the high, Q14, [`super::rotary`]);
//! - each layer: `ln1` N, `s_q s_k s_v` (f f f), `W_Q` `d_attn x R`, `W_K` and `W_V` `d_kv x R` (to int8
//!   at `s_q`, `s_k`, `s_v`), the score M (`q . k` -> Q11), `W_O` `d_model x R` (to the residual),
//!   with shortformer positions `pos_Q`'s rows `n_ctx x M` (to `s_q`) and `pos_K`'s (to `s_k`);
//!   with an MLP: `ln2` N, `s_pre` (f), `W_in` `d_mlp x R` (to int16 at `s_pre`), the activation's 257
//!   int16 knots (129 words, two per word), `s_post` (f), the M from the activation's output to `W_out`'s
//!   int8 input, that input's scale (f), `W_out` `d_model x R` (to the residual); a gated MLP's
//!   `W_gate` takes `W_in`'s place above (the activation's input), and `s_lin` (f) and `W_in` `d_mlp x
//!   R` follow `W_out` (each R: `b_in` at the product's scale, added after the product as TransformerLens
//!   adds it, and the M from the sum to int16 at `s_lin`); its M then takes `f(pre) lin + b_in` to
//!   `W_out`'s input;
//! - tail: `ln_final` N, `W_U` rows `d_vocab_out x (bias i32, factor f)`: `logit = (acc + bias) factor`;
//! - int4 matrices only: every matrix's group multipliers in blob order, `rows x groups` `u16` each,
//!   two per word ([`super::units`]); the rows' multipliers above are then from the row's unit.
//!
//! A [`Row`] takes a matmul's exact `i32` sum to its output: `out = M (acc + bias)`.

use super::interpolated::KNOTS;
use super::requantize::Multiplier;
use super::units::Units;
use crate::config::{Config, Positional};
use crate::tensors::{TensorId, TensorKind, HEAD_KINDS, LAYER_KINDS, TAIL_KINDS};

/// First word of a plan: `MLIP`.
pub const MAGIC: u32 = u32::from_le_bytes(*b"MLIP");

/// Words of a [`Row`].
const ROW: usize = 3;
/// Words of a [`Multiplier`].
const MUL: usize = 2;
/// Words of a [`Norm`].
const NORM: usize = 5;
/// Words of an activation table's knots, two per word.
const KNOT_WORDS: usize = KNOTS.div_ceil(2);

/// Word `i` of `b` (0 past the end).
#[inline(always)]
fn word(b: &[u8], i: usize) -> u32 {
    match b.get(4 * i..4 * i + 4) {
        Some(w) => u32::from_le_bytes([w[0], w[1], w[2], w[3]]),
        None => 0,
    }
}

/// The multiplier in words `i`, `i + 1` of `b`.
#[inline(always)]
fn multiplier(b: &[u8], i: usize) -> Multiplier {
    Multiplier {
        m: word(b, i) as i32,
        shift: word(b, i + 1) as i32,
    }
}

/// A matmul output's requantisation: its bias at the accumulator's scale and the multiplier to the
/// output's scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// `round(b / (s_w s_x))`.
    pub bias: i32,
    /// `s_w s_x / s_out`.
    pub to_out: Multiplier,
}

impl Row {
    /// The row in words `i..i + 3` of `b` (zeros past the end).
    #[inline(always)]
    fn at(b: &[u8], i: usize) -> Row {
        Row {
            bias: word(b, i) as i32,
            to_out: multiplier(b, i + 1),
        }
    }

    /// `M (acc + bias)`, saturating.
    #[inline(always)]
    pub fn apply(self, acc: i32) -> i32 {
        self.to_out.apply(acc.saturating_add(self.bias))
    }
}

/// The rows of one matrix: `[bias, m, shift]` per output.
#[derive(Clone, Copy, Debug)]
pub struct Rows<'a>(&'a [u8]);

impl Rows<'_> {
    /// Output `r`'s requantisation (zeros past the end).
    #[inline(always)]
    pub fn get(&self, r: usize) -> Row {
        Row::at(self.0, ROW * r)
    }

    /// `out[r] = M_r (out[r] / z + bias_r)` for every output, in place (zeros past the end, as
    /// [`Rows::get`]): sums over an input zoomed by `z` from the scale the rows were made for
    /// ([`super::zoom`]).
    #[inline(always)]
    pub fn apply(&self, out: &mut [i32], zoom: super::zoom::Zoom) {
        let mut rows = self.0.chunks_exact(4 * ROW);
        for o in out.iter_mut() {
            let acc = zoom.back(*o);
            *o = Row::at(rows.next().unwrap_or(&[]), 0).apply(acc);
        }
    }
}

/// A norm's constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Norm {
    /// `n^2 eps / s_resid^2`, rounded ([`super::norm::normalize`]).
    pub eps_n2: u64,
    /// From the norm's Q11 output (no norm: the residual) to the next matmul's int8 input.
    pub to_x: Multiplier,
    /// That input's scale.
    pub s_x: f32,
}

/// A cursor over a plan's words, handing out sections in order.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn at(bytes: &'a [u8], at: usize) -> Self {
        Cursor { bytes, at }
    }

    fn take(&mut self, words: usize) -> &'a [u8] {
        let start = (4 * self.at).min(self.bytes.len());
        let end = (4 * (self.at + words)).min(self.bytes.len());
        self.at += words;
        &self.bytes[start..end]
    }
    fn norm(&mut self) -> Norm {
        let b = self.take(NORM);
        Norm {
            eps_n2: u64::from(word(b, 0)) | u64::from(word(b, 1)) << 32,
            to_x: multiplier(b, 2),
            s_x: f32::from_bits(word(b, 4)),
        }
    }
}

/// `Ok` if the integer-only arithmetic covers a model of `cfg` (standard, shortformer or rotary
/// positions, folded or no norms, a residual stream the integer norm takes), else what it lacks.
pub fn check_config(cfg: &Config) -> Result<(), &'static str> {
    if matches!(cfg.positional, Positional::Sinusoidal) {
        return Err(
            "the integer arithmetic takes learned or rotary positions, not sinusoidal ones",
        );
    }
    if cfg.normalization.has_weight() {
        return Err(
            "the integer arithmetic takes folded norms only (convert without --no-fold-ln)",
        );
    }
    if cfg.d_model > super::norm::MAX_WIDTH {
        return Err("the integer norm takes d_model <= 1024");
    }
    Ok(())
}

/// Rotary angles of one position (0 without rotary positions).
const fn rotary_angles(cfg: &Config) -> usize {
    match cfg.positional {
        Positional::Rotary { dim, .. } => dim / 2,
        _ => 0,
    }
}

/// Word offset of the rotary table (after the embeddings' multipliers).
const fn rotary_at(cfg: &Config) -> usize {
    let pos = match cfg.positional {
        Positional::Standard => cfg.n_ctx,
        _ => 0,
    };
    2 + MUL * (cfg.d_vocab + pos)
}

/// Words of the head section.
const fn head_words(cfg: &Config) -> usize {
    rotary_at(cfg) + cfg.n_ctx * rotary_angles(cfg)
}

/// Words of one layer's section.
const fn layer_words(cfg: &Config) -> usize {
    let attn = NORM
        + 3
        + ROW * (cfg.d_attn() + 2 * cfg.d_kv())
        + MUL
        + ROW * cfg.d_model
        + positional_words(cfg);
    let mlp = match cfg.d_mlp {
        Some(m) => {
            let lin = if cfg.gated_mlp { 1 + ROW * m } else { 0 };
            NORM + 1 + ROW * m + KNOT_WORDS + 1 + MUL + 1 + ROW * cfg.d_model + lin
        }
        None => 0,
    };
    attn + mlp
}

/// Words of a layer's shortformer multipliers: `pos_Q`'s and `pos_K`'s rows (0 for other positions).
const fn positional_words(cfg: &Config) -> usize {
    match cfg.positional {
        Positional::Shortformer => 2 * MUL * cfg.n_ctx,
        _ => 0,
    }
}

/// Words of the tail section.
const fn tail_words(cfg: &Config) -> usize {
    NORM + 2 * cfg.d_vocab_out
}

/// Bytes of the plan of a model with `cfg`.
pub const fn len(cfg: &Config) -> usize {
    4 * (head_words(cfg) + cfg.n_layers * layer_words(cfg) + tail_words(cfg))
}

/// Words of the group multipliers of the matrices among `kinds` that `cfg` has, up to `stop`
/// (excluded; `None`: all of them).
fn kinds_units_words(cfg: &Config, kinds: &[TensorKind], stop: Option<TensorKind>) -> usize {
    let mut n = 0usize;
    for &kind in kinds.iter().take_while(|&&k| Some(k) != stop) {
        if kind.is_matrix() && kind.present(cfg) {
            let [rows, cols] = kind.shape(cfg);
            n = n.saturating_add(super::units::words(rows, cols));
        }
    }
    n
}

/// Words of the group multipliers before the layers', of one layer and after the layers'.
fn units_sections(cfg: &Config) -> [usize; 3] {
    [HEAD_KINDS.as_slice(), &LAYER_KINDS, &TAIL_KINDS].map(|k| kinds_units_words(cfg, k, None))
}

/// Word offset of `id`'s group multipliers among all matrices' in blob order (`cfg`'s).
fn units_at(cfg: &Config, id: TensorId) -> usize {
    let [head, layer, _] = units_sections(cfg);
    if HEAD_KINDS.contains(&id.kind) {
        kinds_units_words(cfg, &HEAD_KINDS, Some(id.kind))
    } else if id.kind.per_layer() {
        let within = kinds_units_words(cfg, &LAYER_KINDS, Some(id.kind));
        head.saturating_add(layer.saturating_mul(id.layer))
            .saturating_add(within)
    } else {
        let within = kinds_units_words(cfg, &TAIL_KINDS, Some(id.kind));
        head.saturating_add(layer.saturating_mul(cfg.n_layers))
            .saturating_add(within)
    }
}

/// Words of the group multipliers of every int4 matrix of `cfg` ([`super::units`]).
fn units_words(cfg: &Config) -> usize {
    let [head, layer, tail] = units_sections(cfg);
    head.saturating_add(layer.saturating_mul(cfg.n_layers))
        .saturating_add(tail)
}

/// Bytes of the plan of a model with `cfg` whose matrices are int4 (`int4`) or int8.
pub fn len_of(cfg: &Config, int4: bool) -> usize {
    match int4 {
        true => len(cfg).saturating_add(4 * units_words(cfg)),
        false => len(cfg),
    }
}

/// A blob's integer plan, read in place (its sections' places follow from the config).
#[derive(Clone, Copy, Debug)]
pub struct Plan<'a> {
    bytes: &'a [u8],
    /// The int4 matrices' group multipliers (empty for int8 matrices).
    units: &'a [u8],
}

/// One layer's constants, read on demand (the view is four words, whatever the layer holds).
#[derive(Clone, Copy, Debug)]
pub struct LayerPlan<'a> {
    words: &'a [u8],
    d_attn: usize,
    d_kv: usize,
    d_model: usize,
    d_mlp: Option<usize>,
    gated: bool,
    /// Rows of each of the shortformer tables (0 without them).
    n_positions: usize,
}

/// Section `n` words long at word `at` of `b` (short or empty past the end).
fn section(b: &[u8], at: usize, n: usize) -> &[u8] {
    let start = (4 * at).min(b.len());
    let end = (4 * (at + n)).min(b.len());
    &b[start..end]
}

impl<'a> LayerPlan<'a> {
    /// Word offsets of `W_Q`'s rows, `W_K`'s, `W_V`'s, the score multiplier, `W_O`'s rows, the MLP
    /// and the shortformer multipliers (which lie between `W_O`'s rows and the MLP).
    fn offsets(&self) -> [usize; 7] {
        let w_q = NORM + 3;
        let w_k = w_q + ROW * self.d_attn;
        let w_v = w_k + ROW * self.d_kv;
        let score = w_v + ROW * self.d_kv;
        let w_o = score + MUL;
        let positional = w_o + ROW * self.d_model;
        let mlp = positional + 2 * MUL * self.n_positions;
        [w_q, w_k, w_v, score, w_o, mlp, positional]
    }

    /// Shortformer positions: the multipliers from row `pos` of `pos_Q` to the queries' int8 scale and
    /// of `pos_K` to the keys' (zeros past the table or without them).
    pub fn positional(&self, pos: usize) -> [Multiplier; 2] {
        let at = self.offsets()[6];
        match pos < self.n_positions {
            true => [
                multiplier(self.words, at + MUL * pos),
                multiplier(self.words, at + MUL * (self.n_positions + pos)),
            ],
            false => [Multiplier { m: 0, shift: 0 }; 2],
        }
    }

    /// `ln1`.
    pub fn ln1(&self) -> Norm {
        Cursor::at(self.words, 0).norm()
    }

    /// Scale of the int8 queries.
    pub fn s_q(&self) -> f32 {
        f32::from_bits(word(self.words, NORM))
    }

    /// Scale of the int8 keys.
    pub fn s_k(&self) -> f32 {
        f32::from_bits(word(self.words, NORM + 1))
    }

    /// Scale of the int8 values (also the mixed values' `z`).
    pub fn s_v(&self) -> f32 {
        f32::from_bits(word(self.words, NORM + 2))
    }

    /// `W_Q` to int8 at `s_q`.
    pub fn w_q(&self) -> Rows<'a> {
        Rows(section(self.words, self.offsets()[0], ROW * self.d_attn))
    }

    /// `W_K` to int8 at `s_k`.
    pub fn w_k(&self) -> Rows<'a> {
        Rows(section(self.words, self.offsets()[1], ROW * self.d_kv))
    }

    /// `W_V` to int8 at `s_v`.
    pub fn w_v(&self) -> Rows<'a> {
        Rows(section(self.words, self.offsets()[2], ROW * self.d_kv))
    }

    /// `q . k` (scale `s_q s_k`) to the softmax's Q11 scores, `/ attn_scale` included.
    pub fn score(&self) -> Multiplier {
        multiplier(self.words, self.offsets()[3])
    }

    /// `W_O` (input `z` at `s_v`) to the residual.
    pub fn w_o(&self) -> Rows<'a> {
        Rows(section(self.words, self.offsets()[4], ROW * self.d_model))
    }

    /// The MLP's constants (attention-only models: `None`).
    pub fn mlp(&self) -> Option<MlpPlan<'a>> {
        let d_mlp = self.d_mlp?;
        Some(MlpPlan {
            words: section(self.words, self.offsets()[5], usize::MAX / 8),
            d_mlp,
            d_model: self.d_model,
            gated: self.gated,
        })
    }
}

/// One MLP's constants, read on demand.
#[derive(Clone, Copy, Debug)]
pub struct MlpPlan<'a> {
    words: &'a [u8],
    d_mlp: usize,
    d_model: usize,
    gated: bool,
}

impl<'a> MlpPlan<'a> {
    /// Word offset of the knots (after `ln2`, `s_pre` and `W_in`'s rows).
    fn knots_at(&self) -> usize {
        NORM + 1 + ROW * self.d_mlp
    }

    /// `ln2`.
    pub fn ln2(&self) -> Norm {
        Cursor::at(self.words, 0).norm()
    }

    /// Scale of the int16 pre-activation.
    pub fn s_pre(&self) -> f32 {
        f32::from_bits(word(self.words, NORM))
    }

    /// The activation's input rows, to int16 at `s_pre`: `W_in`'s, or a gated MLP's `W_gate`'s.
    pub fn w_pre(&self) -> Rows<'a> {
        Rows(section(self.words, NORM + 1, ROW * self.d_mlp))
    }

    /// Scale of the activation's int16 output.
    pub fn s_post(&self) -> f32 {
        f32::from_bits(word(self.words, self.knots_at() + KNOT_WORDS))
    }

    /// From the activation's output (gated: its product with `lin`) to `W_out`'s int8 input.
    pub fn post_to_x(&self) -> Multiplier {
        multiplier(self.words, self.knots_at() + KNOT_WORDS + 1)
    }

    /// `W_out`'s input scale.
    pub fn s_x(&self) -> f32 {
        f32::from_bits(word(self.words, self.knots_at() + KNOT_WORDS + 1 + MUL))
    }

    /// Word offset of `W_out`'s rows.
    fn w_out_at(&self) -> usize {
        self.knots_at() + KNOT_WORDS + 2 + MUL
    }

    /// `W_out` to the residual.
    pub fn w_out(&self) -> Rows<'a> {
        Rows(section(self.words, self.w_out_at(), ROW * self.d_model))
    }

    /// A gated MLP's linear part: the scale of its int16 `lin = W_in x` and `W_in`'s rows (each row's
    /// multiplier to `lin`, its bias `b_in` at the product `f(pre) lin`'s scale; `None` ungated).
    pub fn linear(&self) -> Option<(f32, Rows<'a>)> {
        let at = self.w_out_at() + ROW * self.d_model;
        self.gated.then(|| {
            (
                f32::from_bits(word(self.words, at)),
                Rows(section(self.words, at + 1, ROW * self.d_mlp)),
            )
        })
    }

    /// Knot `k` of the activation table (0 past the end).
    #[inline(always)]
    pub fn knot(&self, k: usize) -> i16 {
        let at = 4 * self.knots_at() + 2 * k;
        match self.words.get(at..at + 2) {
            Some(b) if k < KNOTS => i16::from_le_bytes([b[0], b[1]]),
            _ => 0,
        }
    }

    /// `f(s_pre q)` at the output's scale, interpolated between the stored knots as
    /// [`super::interpolated::Interpolated::apply`] does.
    #[inline(always)]
    pub fn activate(&self, q: i16) -> i16 {
        super::interpolated::lookup(q, |k| self.knot(k))
    }
}

/// The tail's constants.
#[derive(Clone, Copy, Debug)]
pub struct TailPlan<'a> {
    /// `ln_final`.
    pub ln_final: Norm,
    /// `W_U`'s rows: `[bias, factor]`.
    unembed: &'a [u8],
}

impl TailPlan<'_> {
    /// Logit `r` of `W_U`'s exact sum `acc`: `(acc + bias) factor`, the one float product of the arithmetic.
    #[inline(always)]
    pub fn logit(&self, r: usize, acc: i32) -> f32 {
        let bias = word(self.unembed, 2 * r) as i32;
        let factor = f32::from_bits(word(self.unembed, 2 * r + 1));
        acc.saturating_add(bias) as f32 * factor
    }
}

impl<'a> Plan<'a> {
    /// The plan in `bytes` for `cfg` with int4 matrices (`int4`) or int8 ones, `None` unless it
    /// starts with [`MAGIC`] and has exactly [`len_of`] bytes.
    pub fn parse(bytes: &'a [u8], cfg: &Config, int4: bool) -> Option<Self> {
        if bytes.len() != len_of(cfg, int4) || word(bytes, 0) != MAGIC {
            return None;
        }
        let (bytes, units) = bytes.split_at(len(cfg));
        Some(Plan { bytes, units })
    }

    /// The group multipliers of the int4 matrix `id` (`cfg` the plan's; empty for int8 matrices or
    /// a tensor that is no matrix of `cfg`).
    pub fn units(&self, cfg: &Config, id: TensorId) -> Units<'a> {
        let [rows, cols] = id.shape(cfg);
        let groups = cols.div_ceil(crate::blob::dtype::I4_GROUP);
        if self.units.is_empty() || !id.kind.is_matrix() {
            return Units::new(&[], groups);
        }
        Units::new(
            section(
                self.units,
                units_at(cfg, id),
                super::units::words(rows, cols),
            ),
            groups,
        )
    }

    /// The residual stream's scale.
    pub fn s_resid(&self) -> f32 {
        f32::from_bits(word(self.bytes, 1))
    }

    /// The multiplier from row `token` of `W_E` to the residual.
    #[inline(always)]
    pub fn embed(&self, token: usize) -> Multiplier {
        multiplier(self.bytes, 2 + MUL * token)
    }

    /// The multiplier from row `pos` of `W_pos` to the residual (`cfg` the plan's, standard positions).
    #[inline(always)]
    pub fn pos_embed(&self, cfg: &Config, pos: usize) -> Multiplier {
        match pos < cfg.n_ctx {
            true => multiplier(self.bytes, 2 + MUL * (cfg.d_vocab + pos)),
            false => Multiplier { m: 0, shift: 0 },
        }
    }

    /// The Q14 `(cos, sin)` of rotary angle `k` at `pos` (`cfg` the plan's; zeros past the table).
    #[inline(always)]
    pub fn rotary(&self, cfg: &Config, pos: usize, k: usize) -> (i16, i16) {
        let n = rotary_angles(cfg);
        match pos < cfg.n_ctx && k < n {
            true => {
                let w = word(self.bytes, rotary_at(cfg) + pos * n + k);
                (w as u16 as i16, (w >> 16) as u16 as i16)
            }
            false => (0, 0),
        }
    }

    /// Layer `layer`'s constants (`cfg` the plan's).
    pub fn layer(&self, cfg: &Config, layer: usize) -> LayerPlan<'a> {
        let n = layer_words(cfg);
        LayerPlan {
            words: section(self.bytes, head_words(cfg) + layer * n, n),
            d_attn: cfg.d_attn(),
            d_kv: cfg.d_kv(),
            d_model: cfg.d_model,
            d_mlp: cfg.d_mlp,
            gated: cfg.gated_mlp,
            n_positions: positional_words(cfg) / (2 * MUL),
        }
    }

    /// The tail's constants (`cfg` the plan's).
    pub fn tail(&self, cfg: &Config) -> TailPlan<'a> {
        let mut c = Cursor::at(
            self.bytes,
            head_words(cfg) + cfg.n_layers * layer_words(cfg),
        );
        TailPlan {
            ln_final: c.norm(),
            unembed: c.take(usize::MAX / 8),
        }
    }
}

/// A plan being written (host, at conversion): the sections in the order [`Plan`] reads them.
#[cfg(feature = "std")]
#[derive(Clone, Debug, Default)]
pub struct PlanWriter(std::vec::Vec<u8>);

#[cfg(feature = "std")]
impl PlanWriter {
    /// A plan starting with [`MAGIC`] and the residual stream's scale.
    pub fn new(s_resid: f32) -> Self {
        let mut w = PlanWriter::default();
        w.word(MAGIC);
        w.f32(s_resid);
        w
    }

    /// One word.
    pub fn word(&mut self, w: u32) {
        self.0.extend_from_slice(&w.to_le_bytes());
    }

    /// An `f32`'s bits.
    pub fn f32(&mut self, x: f32) {
        self.word(x.to_bits());
    }

    /// A multiplier.
    pub fn multiplier(&mut self, m: Multiplier) {
        self.word(m.m as u32);
        self.word(m.shift as u32);
    }

    /// A matmul output's requantisation.
    pub fn row(&mut self, r: Row) {
        self.word(r.bias as u32);
        self.multiplier(r.to_out);
    }

    /// A norm's constants.
    pub fn norm(&mut self, n: Norm) {
        self.word(n.eps_n2 as u32);
        self.word((n.eps_n2 >> 32) as u32);
        self.multiplier(n.to_x);
        self.f32(n.s_x);
    }

    /// A rotary angle's Q14 `cos` and `sin`.
    pub fn angle(&mut self, (cos, sin): (i16, i16)) {
        self.word(u32::from(cos as u16) | u32::from(sin as u16) << 16);
    }

    /// An activation table's knots.
    pub fn knots(&mut self, knots: &[i16; KNOTS]) {
        for pair in knots.chunks(2) {
            let hi = pair.get(1).copied().unwrap_or(0);
            self.word(u32::from(pair[0] as u16) | u32::from(hi as u16) << 16);
        }
    }

    /// One logit's bias and factor.
    pub fn logit(&mut self, bias: i32, factor: f32) {
        self.word(bias as u32);
        self.f32(factor);
    }

    /// One int4 matrix's group multipliers (row-major), padded to a whole word.
    pub fn units(&mut self, units: &[u16]) {
        for pair in units.chunks(2) {
            let hi = pair.get(1).copied().unwrap_or(0);
            self.word(u32::from(pair[0]) | u32::from(hi) << 16);
        }
    }

    /// The bytes written.
    pub fn into_bytes(self) -> std::vec::Vec<u8> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Normalization;

    fn config(d_mlp: Option<usize>) -> Config {
        let mut cfg = Config::new(2, 8, 2, 4, 5, 3, d_mlp);
        cfg.normalization = Normalization::LNPre;
        cfg
    }

    /// A plan whose every word is its own index (after the magic), so each section's place shows.
    fn numbered(cfg: &Config) -> std::vec::Vec<u8> {
        let mut w = PlanWriter::new(f32::from_bits(1));
        for i in 2..len(cfg) / 4 {
            w.word(i as u32);
        }
        w.into_bytes()
    }

    #[test]
    fn sections_lie_where_the_layout_says() {
        for d_mlp in [None, Some(12)] {
            let cfg = config(d_mlp);
            let bytes = numbered(&cfg);
            let plan = Plan::parse(&bytes, &cfg, false).unwrap();
            assert_eq!(plan.s_resid().to_bits(), 1);
            assert_eq!(plan.embed(0).m, 2);
            assert_eq!(plan.embed(4).shift, 11);
            assert_eq!(plan.pos_embed(&cfg, 0).m, 12);
            assert_eq!(plan.pos_embed(&cfg, 3), Multiplier { m: 0, shift: 0 });
            let (l0, l1) = (plan.layer(&cfg, 0), plan.layer(&cfg, 1));
            assert_eq!(l0.ln1().eps_n2, 18 | 19 << 32);
            assert_eq!(l0.s_q().to_bits(), 23);
            assert_eq!(l0.w_q().get(0).bias, 26);
            let stride = layer_words(&cfg) as i32;
            assert_eq!(l1.w_q().get(1).to_out.m, 30 + stride);
            assert_eq!(l1.mlp().is_some(), d_mlp.is_some());
            let tail = head_words(&cfg) + 2 * layer_words(&cfg);
            assert_eq!(
                plan.tail(&cfg).ln_final.eps_n2,
                tail as u64 | (tail as u64 + 1) << 32
            );
            let last = (len(&cfg) / 4 - 1) as u32;
            let want = (last - 1) as f32 * f32::from_bits(last);
            assert_eq!(plan.tail(&cfg).logit(4, 0), want);
        }
    }

    #[test]
    fn a_plan_of_another_length_or_magic_is_refused() {
        let cfg = config(Some(12));
        let bytes = numbered(&cfg);
        assert!(Plan::parse(&bytes[..bytes.len() - 4], &cfg, false).is_none());
        assert!(Plan::parse(&bytes, &config(None), false).is_none());
        let mut bad = bytes.clone();
        bad[0] ^= 1;
        assert!(Plan::parse(&bad, &cfg, false).is_none());
    }

    #[test]
    fn an_int4_plan_holds_each_matrix_s_units_in_blob_order() {
        let cfg = config(Some(40));
        let mut w = PlanWriter::new(1.0);
        for _ in 2..len(&cfg) / 4 {
            w.word(0);
        }
        // Every matrix's units numbered from its first: `1000 * i + k` for the `i`-th matrix.
        let matrices: std::vec::Vec<TensorId> = crate::tensors::Catalogue::new(&cfg)
            .ids()
            .filter(|id| id.kind.is_matrix())
            .collect();
        for (i, id) in matrices.iter().enumerate() {
            let [rows, cols] = id.shape(&cfg);
            let n = rows * cols.div_ceil(crate::blob::dtype::I4_GROUP);
            let units: std::vec::Vec<u16> = (0..n).map(|k| (1000 * i + k) as u16).collect();
            w.units(&units);
        }
        let bytes = w.into_bytes();
        assert_eq!(bytes.len(), len_of(&cfg, true));
        assert!(Plan::parse(&bytes, &cfg, false).is_none());
        let plan = Plan::parse(&bytes, &cfg, true).unwrap();
        for (i, id) in matrices.iter().enumerate() {
            let [rows, cols] = id.shape(&cfg);
            let groups = cols.div_ceil(crate::blob::dtype::I4_GROUP);
            let units = plan.units(&cfg, *id);
            let last = rows * groups - 1;
            assert_eq!(units.get(0, 0), (1000 * i) as i32, "{id}");
            assert_eq!(
                units.get(rows - 1, groups - 1),
                (1000 * i + last) as i32,
                "{id}"
            );
            assert_eq!(units.get(rows, 0), 0, "{id}");
        }
        let int8 = numbered(&cfg);
        let plan = Plan::parse(&int8, &cfg, false).unwrap();
        assert_eq!(plan.units(&cfg, matrices[0]).get(0, 0), 0);
    }

    #[test]
    fn knots_round_trip() {
        let cfg = config(Some(12));
        let mut knots = [0i16; KNOTS];
        for (k, v) in knots.iter_mut().enumerate() {
            *v = (k as i16 - 128) * 200;
        }
        let mut w = PlanWriter::new(1.0);
        let before = layer_words(&cfg) - (NORM + 1 + ROW * 12 + KNOT_WORDS + 1 + MUL + 1 + ROW * 8);
        for _ in 2..head_words(&cfg) + before + NORM + 1 + ROW * 12 {
            w.word(0);
        }
        w.knots(&knots);
        let mut bytes = w.into_bytes();
        bytes.resize(len(&cfg), 0);
        let mlp = Plan::parse(&bytes, &cfg, false)
            .unwrap()
            .layer(&cfg, 0)
            .mlp()
            .unwrap();
        assert!((0..KNOTS).all(|k| mlp.knot(k) == knots[k]));
        assert_eq!(mlp.activate(i16::MIN), knots[0]);
        assert_eq!(mlp.activate(0), knots[128]);
    }
}
