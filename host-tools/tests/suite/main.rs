//! The host tools' integration tests, one test binary (one link of the host crates): each module holds
//! one area's tests, `common` what several share.

mod binary;
mod common;
/// The hand-built induction model (also `examples/induction_toy.rs`).
#[path = "common/toy.rs"]
mod toy;

mod analysis_fixtures;
mod analysis_toy;
mod cache_vs_tl;
mod cli;
mod cli_analysis;
mod cli_editing;
mod cli_fidelity;
mod cli_integer;
mod cli_report;
mod cli_rounding;
mod cli_text;
mod editing;
mod fidelity_fixtures;
mod hostile_inputs;
mod threads;
mod tokenizer_golden;
mod window;
