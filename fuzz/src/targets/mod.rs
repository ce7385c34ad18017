//! The fuzz targets, one module each: `run(data)` takes one input, returns on inputs it refuses and
//! panics only on a defect. libFuzzer drives them from `fuzz_targets/` (`cargo xtask fuzz`); the replay
//! test runs them on seeds and mutations without instrumentation (`cargo test`).

pub mod blob_bytes;
pub mod blob_resigned;
pub mod config_writer;
pub mod facts_file;
pub mod frame_decoder;
pub mod host_parsers;
pub mod llama2c_files;
pub mod pth_pickle;
pub mod tokenizer_json;

/// A target: its name (the libFuzzer binary's) and its entry.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const ALL: &[Target] = &[
    ("blob_bytes", blob_bytes::run),
    ("blob_resigned", blob_resigned::run),
    ("config_writer", config_writer::run),
    ("facts_file", facts_file::run),
    ("frame_decoder", frame_decoder::run),
    ("host_parsers", host_parsers::run),
    ("llama2c_files", llama2c_files::run),
    ("pth_pickle", pth_pickle::run),
    ("tokenizer_json", tokenizer_json::run),
];
