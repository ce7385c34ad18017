//! Ready-made `no_std`, heap-free hooks for interpretability on the device: ablate heads, record attention
//! patterns, score heads against TransformerLens's detection patterns, attribute logits to heads.
//!
//! Every hook keeps its state in caller-provided buffers (a `static` on a microcontroller) and can be
//! combined with others as a tuple, `(ablation, (recorder, detector))`: the first writes, the next see it.
//! On quantised models the hooks see and write the same `f32` activations (see [`crate::hooks`]).
//!
//! [`sequences`] generates their standard input, repeated random tokens, into a caller's buffer.

mod ablation;
mod detection;
mod head;
mod head_detector;
mod logit_attribution;
mod means;
mod pattern_recorder;
pub mod sequences;

pub use ablation::HeadAblation;
pub use detection::HeadPattern;
pub use head::Head;
pub use head_detector::{HeadDetector, Ratio};
pub use logit_attribution::DirectLogitAttribution;
pub use means::HeadMeans;
pub use pattern_recorder::PatternRecorder;
