//! # microlens
//!
//! TransformerLens-style interpretability for tiny transformers, on microcontrollers: `#![no_std]`, no
//! heap, target-specific code (assembly, SIMD) only in its kernels. A [`Model`] is read in place from a blob (typically `include_bytes!` in flash); a
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
//!
//! The API at a glance:
//! - [`Model`] (a validated blob, its [`Config`] and tensors) and [`Session`] (the forward pass, one
//!   token per [`Session::step`]), sized by [`Model::kv_cache_len`] and [`Model::workspace_len`]
//!   (or, from a config known at build time, [`KvCache::len`] and [`Workspace::len`]); on the host
//!   (`std`), `Session::with_rows` computes a run of positions together in [`Session::run`], layer
//!   by layer, with the same bits;
//! - [`Window`], a session whose context slides over a token stream longer than it ([`WindowMode`]);
//! - [`Hooks`], called at every [`HookPoint`] (a [`HookKind`] at a layer, head and position), and the
//!   ready-made hooks of [`analysis`] (ablation, pattern recording, head detection, logit attribution);
//! - [`Error`], one enum; [`Features`], the optional capabilities a model needs;
//! - the blob format ([`blob`]: [`DType`], [`Activations`], the writer with `std`), the tensors a config
//!   implies ([`tensors`]), their values ([`weights`]), and the logits hash host and firmware print
//!   ([`hash`]);
//! - [`integer`], the integer-only arithmetic's steps (requantisation, exponential, reciprocal,
//!   softmax, square root, norms, activation tables) for cores without an FPU.
//!
//! - on the host: `host` (feature `std`: the blocked `f32` copies that speed up a model's float
//!   matmuls, the same bits) and `encode` (feature `encode`: the rounding the converter shares).
//!
//! Everything else is private: the forward pass's components, the quantised arithmetic, the maths,
//! and the target kernels (`arch/`: one folder per target family, chosen once by `build.rs`), in the
//! layers `docs/architecture.md` lists.

#![no_std]
#![deny(missing_docs)]

#[cfg(any(feature = "std", test))]
extern crate std;

pub mod analysis;
mod arch;
pub mod blob;
mod components;
pub mod config;
mod error;
mod features;
pub mod hash;
pub mod hooks;
#[cfg(feature = "std")]
pub mod host;
pub mod integer;
mod kv_cache;
mod model;
mod session;
pub mod tensors;
#[cfg(test)]
mod testing;
pub mod weights;
mod window;
mod workspace;

mod math;
mod quant;

/// Host-only encoding (feature `encode`, never in a firmware): what the converter
/// (`microlens-host`) calls to round weights and activations exactly as the device does.
#[cfg(feature = "encode")]
pub mod encode {
    pub use crate::quant::encode::{pack_i4, quantize_one, weight_scale, I4_MAX};
    pub use crate::quant::offset::round_trip;
}

pub use blob::{Activations, DType};
pub use config::{ActFn, Config, Normalization, Positional};
pub use error::{Error, Inconsistency};
pub use features::Features;
pub use hooks::{HookKind, HookKinds, HookPoint, Hooks};
pub use kv_cache::KvCache;
pub use math::sinusoidal::sinusoidal;
pub use model::Model;
pub use session::Session;
pub use tensors::{TensorId, TensorKind};
pub use window::{Window, WindowMode};
pub use workspace::Workspace;
