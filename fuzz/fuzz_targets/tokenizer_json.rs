//! libFuzzer's entry to [`microlens_fuzz::targets::tokenizer_json`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| microlens_fuzz::targets::tokenizer_json::run(data));
