//! One module per `microlens` subcommand: its clap arguments and what it does.

pub mod circuits;
pub mod convert;
pub mod fidelity;
pub mod inspect;
pub mod patch;
pub mod run;
pub mod train_induction;
