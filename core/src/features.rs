//! The crate's optional capabilities (cargo features) and which of them a model needs.
//!
//! Everything is on by default (`full`). A firmware that knows its blob at build time can leave out the
//! rest (`default-features = false` and, say, `weights-i8` and `activations-i8` for an attention-only
//! int8 model without norms): the code for the other storage types, norms, MLPs and positional schemes is
//! then not in its flash, and [`crate::Model::from_bytes`] rejects a blob that would need it with
//! [`crate::Error::Unsupported`].

use crate::blob::{Activations, DType};
use crate::config::{Config, Positional};

/// Whether this build has LayerNorm and RMSNorm (feature `norm`).
pub(crate) const NORM: bool = cfg!(feature = "norm");
/// Whether this build has MLP blocks (feature `mlp`).
pub(crate) const MLP: bool = cfg!(feature = "mlp");
/// Whether this build has rotary positions (feature `rotary`).
pub(crate) const ROTARY: bool = cfg!(feature = "rotary");
/// Whether this build has shortformer positions (feature `shortformer`).
pub(crate) const SHORTFORMER: bool = cfg!(feature = "shortformer");
/// Whether this build has sinusoidal positions (feature `sinusoidal`).
pub(crate) const SINUSOIDAL: bool = cfg!(feature = "sinusoidal");

/// A set of optional features, by name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    names: [&'static str; 9],
    len: usize,
    /// The first name added whose feature this build lacks.
    missing: Option<&'static str>,
}

impl Features {
    /// Adds `name`, whose feature is `compiled` in this build or not (known when the caller is
    /// compiled, so an unneeded check costs no code).
    fn add(&mut self, name: &'static str, compiled: bool) {
        if !compiled && self.missing.is_none() {
            self.missing = Some(name);
        }
        if !self.names[..self.len].contains(&name) && self.len < self.names.len() {
            self.names[self.len] = name;
            self.len += 1;
        }
    }

    /// The features a model with `cfg`, `activations` and matrices stored as `dtypes` needs.
    pub(crate) fn needed(
        cfg: &Config,
        activations: Activations,
        dtypes: impl IntoIterator<Item = DType>,
    ) -> Self {
        let mut f = Features::default();
        f.add(activations.feature(), activations.compiled());
        dtypes
            .into_iter()
            .for_each(|d| f.add(d.feature(), d.compiled()));
        if cfg.normalization.is_some() {
            f.add("norm", NORM);
        }
        if !cfg.attn_only() {
            f.add("mlp", MLP);
        }
        match cfg.positional {
            Positional::Standard => {}
            Positional::Shortformer => f.add("shortformer", SHORTFORMER),
            Positional::Rotary { .. } => f.add("rotary", ROTARY),
            Positional::Sinusoidal => f.add("sinusoidal", SINUSOIDAL),
        }
        f
    }

    /// The names, in the order they were found.
    pub fn names(&self) -> &[&'static str] {
        &self.names[..self.len]
    }

    /// The first of these that this build lacks, if any.
    pub fn first_missing(&self) -> Option<&'static str> {
        self.missing
    }
}
