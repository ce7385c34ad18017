//! Running blobs on the host with the core crate's own forward pass: logits and patterns ([`run`]), every
//! activation ([`cache`]; a batch's, in place: [`batch_cache`], [`layout`]; named as TransformerLens 2.x and 4.x name it: [`hook_names`]), with int8 roundings emulated ([`emulation`]) or the integer-only arithmetic's steps ([`integer_emulation`]); next-token metrics
//! ([`metrics`]) and the generated token sequences ([`sequences`]); streams longer than the context
//! through a sliding window ([`window`]).

pub mod batch_cache;
pub mod cache;
pub mod emulation;
pub mod generate;
pub mod hook_names;
pub mod integer_emulation;
pub mod layout;
pub mod metrics;
pub mod run;
pub mod sequences;
pub mod window;
