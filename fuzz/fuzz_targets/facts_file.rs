//! libFuzzer's entry to [`microlens_fuzz::targets::facts_file`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| microlens_fuzz::targets::facts_file::run(data));
