//! Host side of microlens: read checkpoints, process weights as TransformerLens does, write blobs, run,
//! compare and analyse them with the `microlens` core crate's own forward pass.
//!
//! Module map: each module and the modules of this crate it imports (outside its tests).
//!
//! | module | holds | imports |
//! |---|---|---|
//! | [`hash`] | the logits hash the device prints | - |
//! | [`io`] | files written atomically, token lists, `f32` safetensors of named tensors | [`import`] (its `Tensor`) |
//! | [`text`] | tokenizers (HF `tokenizer.json`, bytes), TransformerLens's BOS rule, text windows | [`hash`], [`io`] |
//! | [`import`] | checkpoints (safetensors, `.pth`, HF GPT-2) to a TransformerLens state dict | [`io`] |
//! | [`eval`] | run a blob, metrics, token sequences, activation caches, int8 emulation | [`import`], [`io`], [`text`] |
//! | [`quantize`] | encoders, rounding (nearest, GPTQ), calibration, lookup tables | [`eval`], [`io`], [`text`] |
//! | [`convert`] | fold, lay out and encode a state dict as a blob | [`import`], [`io`], [`quantize`] |
//! | [`analysis`] | circuits: composition, copying, patching, tracing, factored matrices | [`eval`], [`import`] |
//! | [`fidelity`] | a quantised blob against its float reference, per model and per head | [`analysis`], [`eval`] |
//! | [`report`] | text, JSON, plots and HTML pages of the above | [`analysis`], [`eval`], [`fidelity`], [`import`], [`io`], [`quantize`] |
//! | [`train`] | training the tiny induction and fact models (candle) | [`eval`], [`import`], [`io`] |
//! | [`device`] | a board in serve mode over its serial link (the wire protocol's client) | - |
//! | [`edit`] | writing facts into a model's MLP (ROME, MEMIT) | [`eval`], [`import`], [`quantize`], [`text`], [`train`] |
//!
//! `io` and `import` share one type: `io::safetensors` writes `import::state_dict::Tensor`, and `import`
//! reads files through `io::files`. The `microlens` binary's `cli` module parses arguments and calls
//! these; nothing here calls it.

pub mod analysis;
pub mod convert;
pub mod device;
pub mod edit;
pub mod eval;
pub mod excerpt;
pub mod fidelity;
pub mod hash;
pub mod import;
pub mod io;
pub mod quantize;
pub mod report;
pub mod text;
pub mod train;
