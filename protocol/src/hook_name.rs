//! TransformerLens hook names on the wire: `blocks.1.attn.hook_pattern` to `(HookKind::Pattern, 1)`.

use microlens::HookKind;

/// The kind and layer of a TransformerLens hook name (`hook_embed`, `blocks.L.<suffix>`, `logits`),
/// `None` for anything else. Layer-less kinds have layer 0.
pub fn parse(name: &str) -> Option<(HookKind, usize)> {
    let (layer, suffix) = match name.strip_prefix("blocks.") {
        Some(rest) => {
            let (digits, suffix) = rest.split_once('.')?;
            if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            (digits.parse().ok()?, suffix)
        }
        None => (0, name),
    };
    let kind = HookKind::ALL.into_iter().find(|k| k.suffix() == suffix)?;
    match kind.per_layer() == name.starts_with("blocks.") {
        true => Some((kind, layer)),
        false => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in HookKind::ALL {
            let layer = if kind.per_layer() { 3 } else { 0 };
            let point = microlens::HookPoint {
                kind,
                layer,
                head: 0,
                pos: 0,
            };
            let mut text = heapless::String::<64>::new();
            core::fmt::write(&mut text, format_args!("{point}")).unwrap();
            assert_eq!(parse(&text), Some((kind, layer)), "{text}");
        }
    }

    #[test]
    fn malformed_names_are_refused() {
        for bad in [
            "",
            "blocks.",
            "blocks.x.hook_resid_pre",
            "blocks.0",
            "blocks..hook_resid_pre",
            "blocks.99999.hook_resid_pre",
            "blocks.0.logits",
            "hook_resid_pre",
            "blocks.0.attn.hook_patern",
            "blocks.+1.hook_resid_pre",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
