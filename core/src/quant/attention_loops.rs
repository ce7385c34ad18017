//! The attention's per-score and per-position loops over the int8 cache's integer sums: the scores'
//! rescaling and maximum ([`scores`]), the value mix's weights and their maximum ([`weight_bits`]),
//! their fixed-point lanes ([`pack_lanes`]) and the mix's sums' rescaling ([`rescale`]). The
//! target's implementation through the kernels' facade (`crate::arch`): plain Rust, or on cores with the
//! DSP instructions and an FPU the same operations in the same order in assembly, so the same bits.

pub(crate) use crate::arch::{fixed, lanes, pack_lanes, rescale, scores, weight_bits};
