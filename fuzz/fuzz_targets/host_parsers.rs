//! libFuzzer's entry to [`microlens_fuzz::targets::host_parsers`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| microlens_fuzz::targets::host_parsers::run(data));
