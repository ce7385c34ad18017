//! libFuzzer's entry to [`microlens_fuzz::targets::llama2c_files`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| microlens_fuzz::targets::llama2c_files::run(data));
