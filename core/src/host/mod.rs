//! Host throughput (feature `std`, never in a firmware): the same forward pass, the same bits, wider
//! loops.
//!
//! [`HostWeights`] (`weights/host.rs`, built here in `prepare.rs`) is a copy of a model's matrices,
//! widened to `f32` and column-blocked (`weights/blocked.rs`): [`LANES`] consecutive rows interleaved
//! column by column, so one column of a block is one contiguous run of [`LANES`] values.
//! [`Model::with_host`](crate::Model::with_host) attaches it; every float matrix-vector product of
//! that model then runs [`LANES`] rows at a time, one SIMD lane per row (the CPU's widest vector
//! unit, through `arch/host/`). Each lane is still its row's dot product summed left to right from 0,
//! a separate multiply then add per column (Rust never contracts to a fused multiply-add), followed
//! by the same scale multiplications in the same order as the device's one-row kernels in
//! `weights/mod.rs`: the loop order across rows changes, the arithmetic of every output does not, so
//! the bits are the device's (pinned by `tests/` and the kernels' tests).
//!
//! Rows past the last whole block, matrices that are not whole `x`-long rows and the int8-activation
//! kernels (exact integers: their order does not matter) take the ordinary path.

mod prepare;

pub use crate::weights::blocked::LANES;
pub use crate::weights::host::HostWeights;
