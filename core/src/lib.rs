//! # microlens
//!
//! TransformerLens-style interpretability for tiny transformers, on microcontrollers: `#![no_std]`, no
//! heap, no `unsafe` (but for the opt-in `dsp` kernels). A [`Model`] is read in place from a blob (typically `include_bytes!` in flash); a
//! [`Session`] runs it token by token over caller-provided buffers, calling [`Hooks`] at every
//! TransformerLens hook point so the model can report (and ablate) its own circuits.
//!
//! ```
//! # fn demo(blob: &[u8]) -> Result<(), microlens::Error> {
//! let model = microlens::Model::from_bytes(blob)?;
//! let mut kv = vec![0.0; model.kv_cache_len()];
//! let mut ws = vec![0.0; model.workspace_len()];
//! let mut session = microlens::Session::new(&model, &mut kv, &mut ws)?;
//! let logits = session.step(3)?;
//! # let _ = logits; Ok(()) }
//! ```
//!
//! The maths follows TransformerLens 2.x (`HookedTransformer`) exactly; the feature `std` adds only host
//! conveniences (blob writing, `std::error::Error`).

#![no_std]
// No `unsafe` anywhere; with the feature `dsp`, only the DSP instructions and the four-row loop of
// `quant::dsp` (and with `mve`, the Helium loop of `quant::mve`).
#![cfg_attr(not(feature = "dsp"), forbid(unsafe_code))]
#![cfg_attr(feature = "dsp", deny(unsafe_code))]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod analysis;
pub mod blob;
pub mod components;
pub mod config;
pub mod error;
pub mod features;
pub mod hooks;
pub mod kv_cache;
pub mod math;
pub mod model;
pub mod quant;
pub mod session;
pub mod tensors;
pub mod weights;
pub mod workspace;

pub use blob::{Activations, DType};
pub use config::{ActFn, Config, Normalization, Positional};
pub use error::{Error, Inconsistency};
pub use hooks::{HookKind, HookKinds, HookPoint, Hooks};
pub use kv_cache::KvCache;
pub use model::Model;
pub use session::Session;
pub use tensors::{TensorId, TensorKind};
pub use workspace::Workspace;

impl Model<'_> {
    /// `f32` words of KV cache this model needs at full context.
    pub fn kv_cache_len(&self) -> usize {
        KvCache::len(self.config(), self.activations())
    }
    /// `f32` words of workspace this model needs.
    pub fn workspace_len(&self) -> usize {
        self.config().workspace_len()
    }
    /// `f32` words of KV cache a session capped at `n_ctx` positions needs ([`Session::with_context`]).
    pub fn kv_cache_len_at(&self, n_ctx: usize) -> usize {
        KvCache::len(&self.config().with_context(n_ctx), self.activations())
    }
    /// `f32` words of workspace a session capped at `n_ctx` positions needs.
    pub fn workspace_len_at(&self, n_ctx: usize) -> usize {
        self.config().with_context(n_ctx).workspace_len()
    }
}
