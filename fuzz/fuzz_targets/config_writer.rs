//! libFuzzer's entry to [`microlens_fuzz::targets::config_writer`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| microlens_fuzz::targets::config_writer::run(data));
