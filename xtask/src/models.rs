//! The models the firmware can embed by name (`cargo xtask firmware --model NAME`): the checkpoints
//! shipped in `firmware-example/model/`.

use anyhow::{bail, Result};

/// A shipped model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shipped {
    /// Its name on the command line.
    pub name: &'static str,
    /// Its checkpoint, from the repository root (the config JSON beside it has the same stem).
    pub checkpoint: &'static str,
    /// What it is.
    pub about: &'static str,
    /// Its stack reserve in bytes, if deeper than the boards' `memory.x` (set for the first model): its
    /// RAM is then checked against [`RAM_LIMIT`] (and its flash against [`FLASH_LIMIT`]) instead of the
    /// first model's KV cache + workspace + 2 KiB.
    pub stack_reserve: Option<u32>,
}

/// Flash a shipped model's firmware may take (issue 14's budget on the Cortex-M4F).
pub const FLASH_LIMIT: u64 = 128 * 1024;
/// RAM a shipped model's firmware may take (issue 14's budget on the Cortex-M4F).
pub const RAM_LIMIT: u64 = 64 * 1024;

/// Every shipped model; the first is the default.
pub const SHIPPED: [Shipped; 2] = [
    Shipped {
        name: "induction",
        checkpoint: "firmware-example/model/induction-2l.safetensors",
        about: "the token-level induction model (vocabulary 64), on a seeded random prompt",
        stack_reserve: None,
    },
    Shipped {
        name: "bytes",
        checkpoint: "firmware-example/model/induction-bytes.safetensors",
        about: "the byte-level induction model (vocabulary 256), on an English phrase it continues",
        // Its high-water mark on the Cortex-M4F as int8 (2,632 B) plus the 112 B margin, rounded up.
        stack_reserve: Some(3072),
    },
];

/// The shipped model called `name`.
pub fn by_name(name: &str) -> Result<Shipped> {
    match SHIPPED.iter().find(|m| m.name == name) {
        Some(m) => Ok(*m),
        None => {
            let names: Vec<String> = SHIPPED
                .iter()
                .map(|m| format!("{} ({})", m.name, m.about))
                .collect();
            bail!("no model {name:?}; the shipped ones: {}", names.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_model_is_in_the_repository_and_unknown_names_are_refused() {
        for m in SHIPPED {
            assert_eq!(by_name(m.name).unwrap(), m);
            let path = crate::paths::root().join(m.checkpoint);
            assert!(path.is_file(), "{}", path.display());
            assert!(path.with_extension("json").is_file(), "{}", path.display());
        }
        let err = by_name("nope").unwrap_err().to_string();
        assert!(err.contains("bytes") && err.contains("induction"), "{err}");
    }
}
