//! Hook names: TransformerLens 2.x's (what [`microlens::HookPoint`] renders) and TransformerLens 4.x's
//! canonical names of the same activations (a `TransformerBridge`'s, e.g. `blocks.0.attn.q.hook_out`
//! for `blocks.0.attn.hook_q`), accepted wherever a hook name is. Names 2.x and 4.x share
//! (`blocks.L.attn.hook_pattern`, `blocks.L.ln1.hook_scale`, ...) have no entry.

use microlens::HookKind;

/// Each kind's 4.x names, after `blocks.L.` for the kinds inside a block: the names a
/// `TransformerBridge` in compatibility mode caches for the same tensor (transformer-lens 4.3, GPT-2;
/// docs/transformerlens.md). [`LN_FINAL_IN`], whose layer depends on the model, is apart.
pub const TL4_NAMES: [(HookKind, &str); 29] = [
    (HookKind::Embed, "embed.hook_out"),
    (HookKind::PosEmbed, "pos_embed.hook_out"),
    (HookKind::ResidPre, "hook_in"),
    (HookKind::ResidPre, "ln1.hook_in"),
    (HookKind::Ln1Normalized, "ln1.hook_out"),
    (HookKind::Ln1Normalized, "attn.hook_in"),
    (HookKind::Ln1Normalized, "attn.q.hook_in"),
    (HookKind::Ln1Normalized, "attn.k.hook_in"),
    (HookKind::Ln1Normalized, "attn.v.hook_in"),
    (HookKind::Q, "attn.q.hook_out"),
    (HookKind::K, "attn.k.hook_out"),
    (HookKind::V, "attn.v.hook_out"),
    (HookKind::Z, "attn.o.hook_in"),
    (HookKind::AttnOut, "attn.o.hook_out"),
    (HookKind::AttnOut, "attn.hook_hidden_states"),
    (HookKind::AttnOut, "attn.hook_out"),
    (HookKind::ResidMid, "ln2.hook_in"),
    (HookKind::Ln2Normalized, "ln2.hook_out"),
    (HookKind::Ln2Normalized, "mlp.hook_in"),
    (HookKind::Ln2Normalized, "mlp.in.hook_in"),
    (HookKind::MlpPre, "mlp.in.hook_out"),
    (HookKind::MlpPost, "mlp.out.hook_in"),
    (HookKind::MlpOut, "mlp.out.hook_out"),
    (HookKind::MlpOut, "mlp.hook_out"),
    (HookKind::ResidPost, "hook_out"),
    (HookKind::LnFinalNormalized, "ln_final.hook_out"),
    (HookKind::LnFinalNormalized, "unembed.hook_in"),
    (HookKind::Logits, "unembed.hook_out"),
    (HookKind::Logits, "hook_unembed"),
];

/// 4.x's name of the last block's `hook_resid_post` (the final norm's input).
pub const LN_FINAL_IN: &str = "ln_final.hook_in";

/// The kind and layer a 2.x name (`blocks.1.attn.hook_q`, `hook_embed`) or 4.x name
/// (`blocks.1.attn.q.hook_out`, `embed.hook_out`, [`LN_FINAL_IN`]) names in a model of `n_layers`
/// layers, or `None`.
pub fn parse(name: &str, n_layers: usize) -> Option<(HookKind, usize)> {
    if name == LN_FINAL_IN {
        return Some((HookKind::ResidPost, n_layers.checked_sub(1)?));
    }
    let (layer, suffix) = match name.strip_prefix("blocks.") {
        Some(rest) => {
            let (layer, suffix) = rest.split_once('.')?;
            (Some(layer.parse::<usize>().ok()?), suffix)
        }
        None => (None, name),
    };
    let by_2x = HookKind::ALL.iter().map(|&k| (k, k.suffix()));
    let mut names = by_2x.chain(TL4_NAMES.iter().copied());
    let (kind, _) = names.find(|&(k, s)| s == suffix && k.per_layer() == layer.is_some())?;
    Some((kind, layer.unwrap_or(0)))
}

/// The names of `kind` at `layer` in a model of `n_layers` layers: its 2.x name first, then its 4.x
/// names.
pub fn names(kind: HookKind, layer: usize, n_layers: usize) -> Vec<String> {
    let full = |suffix: &str| match kind.per_layer() {
        true => format!("blocks.{layer}.{suffix}"),
        false => suffix.to_string(),
    };
    let tl4 = TL4_NAMES.iter().filter(|(k, _)| *k == kind);
    let last = kind == HookKind::ResidPost && layer + 1 == n_layers;
    std::iter::once(full(kind.suffix()))
        .chain(tl4.map(|(_, s)| full(s)))
        .chain(last.then(|| LN_FINAL_IN.to_string()))
        .collect()
}

/// Every name of the activation `name` names in a model of `n_layers` layers (2.x first), or just
/// `name` if it names none.
pub fn aliases(name: &str, n_layers: usize) -> Vec<String> {
    match parse(name, n_layers) {
        Some((kind, layer)) => names(kind, layer, n_layers),
        None => vec![name.to_string()],
    }
}

/// The 2.x name of a 2.x or 4.x name in a model of `n_layers` layers, or `None` if neither names an
/// activation.
pub fn canonical(name: &str, n_layers: usize) -> Option<String> {
    parse(name, n_layers).map(|(kind, layer)| names(kind, layer, n_layers).swap_remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_versions_name_one_activation() {
        assert_eq!(parse("blocks.1.attn.q.hook_out", 2), Some((HookKind::Q, 1)));
        assert_eq!(parse("blocks.1.attn.hook_q", 2), Some((HookKind::Q, 1)));
        assert_eq!(parse("embed.hook_out", 2), Some((HookKind::Embed, 0)));
        assert_eq!(
            canonical("blocks.0.hook_out", 2).as_deref(),
            Some("blocks.0.hook_resid_post")
        );
        assert_eq!(canonical("hook_unembed", 2).as_deref(), Some("logits"));
        assert_eq!(
            names(HookKind::Z, 2, 3),
            ["blocks.2.attn.hook_z", "blocks.2.attn.o.hook_in"]
        );
    }

    #[test]
    fn the_final_norms_input_is_the_last_blocks_output() {
        assert_eq!(
            canonical(LN_FINAL_IN, 3).as_deref(),
            Some("blocks.2.hook_resid_post")
        );
        assert_eq!(
            names(HookKind::ResidPost, 2, 3),
            [
                "blocks.2.hook_resid_post",
                "blocks.2.hook_out",
                "ln_final.hook_in"
            ]
        );
        assert_eq!(
            names(HookKind::ResidPost, 1, 3),
            ["blocks.1.hook_resid_post", "blocks.1.hook_out"]
        );
        assert_eq!(parse(LN_FINAL_IN, 0), None);
    }

    #[test]
    fn other_names_are_refused() {
        for bad in [
            "hook_in",
            "blocks.x.hook_in",
            "blocks.0.hook_embed",
            "blocks.0",
            "",
            "blocks.0.attn.q",
            "ln_final.hook_in.x",
        ] {
            assert_eq!(parse(bad, 2), None, "{bad}");
        }
    }
}
