//! Hook points with TransformerLens names, called for the current position during a forward step.
//!
//! A hook sees (and may overwrite) the `f32` activation at one point: the whole vector for residual-stream
//! points, one head's slice for per-head points. Writes change the rest of the forward pass exactly as a
//! TransformerLens hook returning a modified tensor would. With `()` as the hooks, every call is an empty
//! inline function and compiles away.
//!
//! A session of several rows (host, `Session::with_rows`) computes a run of positions layer
//! by layer, TransformerLens's order: every position meets each component before the next one does,
//! each position's points come in their own order, each call with its own `pos`. A hook that carries
//! a value from one point to a later one keys it by position.
//!
//! Quantised models (int8/int4 weights, int8 activations) expose the same points with `f32` values: the
//! float activation before it meets an integer kernel (`hook_k`/`hook_v` before the KV cache rounds them
//! to int8, `hook_z` before `W_O` quantises it per token). A write is used as written by the float code
//! that follows and is rounded to int8 where it next meets an integer kernel, as the unhooked value would
//! be; so an ablation is exact in `f32` models and up to that rounding in int8-activation models.
//!
//! Ready-made hooks (ablation, pattern recording, head detection, logit attribution) are in
//! [`crate::analysis`].

use core::fmt;

/// The kind of a hook point; with a layer, head and position it names one activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HookKind {
    /// `hook_embed`: `W_E[token]`, `[d_model]`.
    Embed,
    /// `hook_pos_embed`: `W_pos[pos]`, `[d_model]` (standard and shortformer).
    PosEmbed,
    /// `blocks.L.hook_resid_pre`, `[d_model]`.
    ResidPre,
    /// `blocks.L.ln1.hook_scale`, `[1]`.
    Ln1Scale,
    /// `blocks.L.ln1.hook_normalized`, `[d_model]` (after `w`, `b` for LN; before `w` for RMS, as in 2.x).
    Ln1Normalized,
    /// `blocks.L.attn.hook_q`, per head `[d_head]`.
    Q,
    /// `blocks.L.attn.hook_k`, per head `[d_head]`.
    K,
    /// `blocks.L.attn.hook_v`, per head `[d_head]`.
    V,
    /// `blocks.L.attn.hook_rot_q`, per head `[d_head]` (rotary).
    RotQ,
    /// `blocks.L.attn.hook_rot_k`, per head `[d_head]` (rotary).
    RotK,
    /// `blocks.L.attn.hook_attn_scores`, per head, the query row over keys `0..=pos`.
    AttnScores,
    /// `blocks.L.attn.hook_pattern`, per head, the query row over keys `0..=pos`.
    Pattern,
    /// `blocks.L.attn.hook_z`, per head `[d_head]`.
    Z,
    /// `blocks.L.attn.hook_result`, per head `[d_model]` (`z_h W_O[h]`, no `b_O`). Asking for it makes the
    /// output projection run head by head, like TransformerLens's `use_attn_result`.
    Result,
    /// `blocks.L.hook_attn_out`, `[d_model]`.
    AttnOut,
    /// `blocks.L.hook_resid_mid`, `[d_model]` (models with MLPs).
    ResidMid,
    /// `blocks.L.ln2.hook_scale`, `[1]`.
    Ln2Scale,
    /// `blocks.L.ln2.hook_normalized`, `[d_model]`.
    Ln2Normalized,
    /// `blocks.L.mlp.hook_pre`, `[d_mlp]` (gated MLPs: the gate's pre-activation `x W_gate`).
    MlpPre,
    /// `blocks.L.mlp.hook_pre_linear`, `[d_mlp]` (gated MLPs only: `x W_in`, before `b_in`).
    MlpPreLinear,
    /// `blocks.L.mlp.hook_post`, `[d_mlp]`.
    MlpPost,
    /// `blocks.L.hook_mlp_out`, `[d_model]`.
    MlpOut,
    /// `blocks.L.hook_resid_post`, `[d_model]`.
    ResidPost,
    /// `ln_final.hook_scale`, `[1]`.
    LnFinalScale,
    /// `ln_final.hook_normalized`, `[d_model]`.
    LnFinalNormalized,
    /// The logits, `[d_vocab_out]` (named `logits`).
    Logits,
}

impl HookKind {
    /// Every kind, in the order a forward step meets them.
    pub const ALL: [HookKind; 26] = [
        HookKind::Embed,
        HookKind::PosEmbed,
        HookKind::ResidPre,
        HookKind::Ln1Scale,
        HookKind::Ln1Normalized,
        HookKind::Q,
        HookKind::K,
        HookKind::V,
        HookKind::RotQ,
        HookKind::RotK,
        HookKind::AttnScores,
        HookKind::Pattern,
        HookKind::Z,
        HookKind::Result,
        HookKind::AttnOut,
        HookKind::ResidMid,
        HookKind::Ln2Scale,
        HookKind::Ln2Normalized,
        HookKind::MlpPre,
        HookKind::MlpPreLinear,
        HookKind::MlpPost,
        HookKind::MlpOut,
        HookKind::ResidPost,
        HookKind::LnFinalScale,
        HookKind::LnFinalNormalized,
        HookKind::Logits,
    ];

    /// Whether the point is inside a block (`blocks.L....`).
    pub const fn per_layer(self) -> bool {
        !matches!(
            self,
            HookKind::Embed
                | HookKind::PosEmbed
                | HookKind::LnFinalScale
                | HookKind::LnFinalNormalized
                | HookKind::Logits
        )
    }

    /// Whether the point is called once per head.
    pub const fn per_head(self) -> bool {
        matches!(
            self,
            HookKind::Q
                | HookKind::K
                | HookKind::V
                | HookKind::RotQ
                | HookKind::RotK
                | HookKind::AttnScores
                | HookKind::Pattern
                | HookKind::Z
                | HookKind::Result
        )
    }

    /// How many heads the point is called for under `cfg`: the key/value heads for `hook_k`, `hook_v`
    /// and `hook_rot_k` (as TransformerLens caches them with grouped-query attention), the query heads
    /// for the other per-head points, one for the rest.
    pub const fn heads(self, cfg: &crate::config::Config) -> usize {
        match self {
            HookKind::K | HookKind::V | HookKind::RotK => cfg.n_key_value_heads,
            _ if self.per_head() => cfg.n_heads,
            _ => 1,
        }
    }

    /// The name after `blocks.L.` (or the whole name outside the blocks).
    pub const fn suffix(self) -> &'static str {
        match self {
            HookKind::Embed => "hook_embed",
            HookKind::PosEmbed => "hook_pos_embed",
            HookKind::ResidPre => "hook_resid_pre",
            HookKind::Ln1Scale => "ln1.hook_scale",
            HookKind::Ln1Normalized => "ln1.hook_normalized",
            HookKind::Q => "attn.hook_q",
            HookKind::K => "attn.hook_k",
            HookKind::V => "attn.hook_v",
            HookKind::RotQ => "attn.hook_rot_q",
            HookKind::RotK => "attn.hook_rot_k",
            HookKind::AttnScores => "attn.hook_attn_scores",
            HookKind::Pattern => "attn.hook_pattern",
            HookKind::Z => "attn.hook_z",
            HookKind::Result => "attn.hook_result",
            HookKind::AttnOut => "hook_attn_out",
            HookKind::ResidMid => "hook_resid_mid",
            HookKind::Ln2Scale => "ln2.hook_scale",
            HookKind::Ln2Normalized => "ln2.hook_normalized",
            HookKind::MlpPre => "mlp.hook_pre",
            HookKind::MlpPreLinear => "mlp.hook_pre_linear",
            HookKind::MlpPost => "mlp.hook_post",
            HookKind::MlpOut => "hook_mlp_out",
            HookKind::ResidPost => "hook_resid_post",
            HookKind::LnFinalScale => "ln_final.hook_scale",
            HookKind::LnFinalNormalized => "ln_final.hook_normalized",
            HookKind::Logits => "logits",
        }
    }
}

/// A set of [`HookKind`]s (a bit set), for [`Hooks::wants`]: `HookKinds::of(&[HookKind::Z]).contains(kind)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HookKinds(u32);

impl HookKinds {
    /// No kind.
    pub const NONE: HookKinds = HookKinds(0);
    /// Every kind.
    pub const ALL: HookKinds = HookKinds::of(&HookKind::ALL);

    /// The set of `kinds`.
    pub const fn of(kinds: &[HookKind]) -> HookKinds {
        let mut bits = 0;
        let mut i = 0;
        while i < kinds.len() {
            bits |= 1 << kinds[i] as u32;
            i += 1;
        }
        HookKinds(bits)
    }

    /// This set and `kind`.
    pub const fn with(self, kind: HookKind) -> HookKinds {
        HookKinds(self.0 | 1 << kind as u32)
    }

    /// Whether `kind` is in the set.
    #[inline(always)]
    pub const fn contains(self, kind: HookKind) -> bool {
        self.0 & (1 << kind as u32) != 0
    }

    /// The kinds named in `list`, comma-separated [`HookKind::suffix`]es (`"attn.hook_pattern,attn.hook_z"`).
    /// `const`, for [`COMPILED`]: an unknown name is an error at compile time.
    pub const fn parse(list: &str) -> HookKinds {
        let b = list.as_bytes();
        let (mut set, mut start) = (HookKinds::NONE, 0);
        while start < b.len() {
            let mut end = start;
            while end < b.len() && b[end] != b',' {
                end += 1;
            }
            set = set.with(kind_named(b, start, end));
            start = end + 1;
        }
        set
    }
}

/// The kind whose suffix is `b[start..end]`; panics (a compile-time error in `const`) if none is.
const fn kind_named(b: &[u8], start: usize, end: usize) -> HookKind {
    let mut k = 0;
    while k < HookKind::ALL.len() {
        let name = HookKind::ALL[k].suffix().as_bytes();
        if name.len() == end - start {
            let mut i = 0;
            while i < name.len() && name[i] == b[start + i] {
                i += 1;
            }
            if i == name.len() {
                return HookKind::ALL[k];
            }
        }
        k += 1;
    }
    panic!("MICROLENS_HOOK_POINTS: unknown hook point (see HookKind::suffix)")
}

/// The hook points this build of the forward pass calls at all: every one, unless the environment
/// variable `MICROLENS_HOOK_POINTS` is set when the crate is compiled, to a comma-separated list of
/// [`HookKind::suffix`]es (none for `MICROLENS_HOOK_POINTS=""`: the forward as if it had no hook
/// points, the baseline of the hooks benchmark). A firmware that knows which points its hooks use
/// leaves the others out of its flash; a hook at a left-out point is never called, whatever its
/// [`Hooks::wants`] says.
pub const COMPILED: HookKinds = match option_env!("MICROLENS_HOOK_POINTS") {
    Some(list) => HookKinds::parse(list),
    None => HookKinds::ALL,
};

/// Whether the forward pass calls `hooks` at points of `kind`: compiled in ([`COMPILED`]) and wanted.
#[inline(always)]
pub(crate) fn wanted<H: Hooks>(hooks: &H, kind: HookKind) -> bool {
    COMPILED.contains(kind) && hooks.wants(kind)
}

/// One activation: a kind at a layer, head and position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HookPoint {
    /// What it is.
    pub kind: HookKind,
    /// Block (0 outside the blocks).
    pub layer: usize,
    /// Head for per-head points, 0 otherwise.
    pub head: usize,
    /// Position of the current token (the query position for attention rows).
    pub pos: usize,
}

/// Renders the TransformerLens hook name, e.g. `blocks.1.attn.hook_pattern`.
impl fmt::Display for HookPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind.per_layer() {
            write!(f, "blocks.{}.{}", self.layer, self.kind.suffix())
        } else {
            f.write_str(self.kind.suffix())
        }
    }
}

/// Something called at every hook point of a forward step.
pub trait Hooks {
    /// Whether to call [`Hooks::hook`] at points of this kind. Points nobody wants cost nothing, and
    /// [`HookKind::Result`] switches the output projection to per head only when wanted.
    #[inline(always)]
    fn wants(&self, kind: HookKind) -> bool {
        let _ = kind;
        true
    }

    /// Reads and may overwrite the activation at `point`.
    fn hook(&mut self, point: HookPoint, act: &mut [f32]);
}

/// No hooks: compiles to nothing.
impl Hooks for () {
    #[inline(always)]
    fn wants(&self, _: HookKind) -> bool {
        false
    }
    #[inline(always)]
    fn hook(&mut self, _: HookPoint, _: &mut [f32]) {}
}

impl<H: Hooks + ?Sized> Hooks for &mut H {
    #[inline(always)]
    fn wants(&self, kind: HookKind) -> bool {
        (**self).wants(kind)
    }
    #[inline(always)]
    fn hook(&mut self, point: HookPoint, act: &mut [f32]) {
        (**self).hook(point, act)
    }
}

/// Two hooks in sequence: the first writes, then the second sees its result.
impl<A: Hooks, B: Hooks> Hooks for (A, B) {
    #[inline(always)]
    fn wants(&self, kind: HookKind) -> bool {
        self.0.wants(kind) || self.1.wants(kind)
    }
    #[inline(always)]
    fn hook(&mut self, point: HookPoint, act: &mut [f32]) {
        if self.0.wants(point.kind) {
            self.0.hook(point, act);
        }
        if self.1.wants(point.kind) {
            self.1.hook(point, act);
        }
    }
}

/// Calls `hooks` at `point` if the build has that kind ([`COMPILED`]) and `hooks` wants it.
#[inline(always)]
pub(crate) fn call<H: Hooks>(
    hooks: &mut H,
    kind: HookKind,
    layer: usize,
    head: usize,
    pos: usize,
    act: &mut [f32],
) {
    if wanted(hooks, kind) {
        hooks.hook(
            HookPoint {
                kind,
                layer,
                head,
                pos,
            },
            act,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_point_lists_parse_by_suffix() {
        let set = HookKinds::parse("attn.hook_pattern,attn.hook_z");
        assert_eq!(set, HookKinds::of(&[HookKind::Pattern, HookKind::Z]));
        assert_eq!(HookKinds::parse(""), HookKinds::NONE);
        assert_eq!(
            HookKinds::parse("logits,"),
            HookKinds::of(&[HookKind::Logits])
        );
        for kind in HookKind::ALL {
            assert_eq!(HookKinds::parse(kind.suffix()), HookKinds::of(&[kind]));
        }
    }

    #[test]
    #[should_panic(expected = "unknown hook point")]
    fn an_unknown_hook_point_is_refused() {
        HookKinds::parse("attn.hook_patern");
    }
}
