//! Running blobs on the host with the core crate's own forward pass: logits and patterns ([`run`]), every
//! activation ([`cache`], named as TransformerLens 2.x and 4.x name it: [`hook_names`]), with int8 roundings emulated ([`emulation`]); next-token metrics
//! ([`metrics`]) and the generated token sequences ([`sequences`]); streams longer than the context
//! through a sliding window ([`window`]).

pub mod cache;
pub mod emulation;
pub mod generate;
pub mod hook_names;
pub mod integer_emulation;
pub mod metrics;
pub mod run;
pub mod sequences;
pub mod window;
