//! Memory editing (ROME, Meng et al. 2022; MEMIT, Meng et al. 2023): write new associations
//! `prompt -> target` into an MLP's output matrix `W_out` with a closed-form low-rank update.
//!
//! For a fact whose last subject token is at position `s`: the key `k` is the MLP's hidden activation
//! (`mlp.hook_post`, the input of `W_out`) at `s` ([`keys`]); the change `delta` of the MLP output at `s`
//! that makes the target win is found by gradient steps on the core forward ([`value`]); `W_out` gets
//! the rank-one update that maps `k` to `k W_out + delta` while moving keys of the calibration
//! distribution (second moment `C`) as little as possible ([`update`]); the edited blob is written in the
//! blob's own folded form ([`blob`]) and measured ([`measure`]).

pub mod blob;
pub mod keys;
pub mod measure;
pub mod update;
pub mod value;
