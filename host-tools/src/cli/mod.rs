//! One module per `microlens` subcommand: its clap arguments and what it does.

pub mod circuits;
pub mod convert;
pub mod device;
pub mod edit;
pub mod eval_induction;
pub mod fidelity;
pub mod generate;
pub mod inspect;
pub mod patch;
pub mod report;
pub mod run;
pub mod text_input;
pub mod token_input;
pub mod trace;
pub mod train_facts;
pub mod train_induction;
pub mod train_llama;
pub mod training_args;
