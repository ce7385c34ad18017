//! libFuzzer's entry to [`microlens_fuzz::targets::blob_resigned`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| microlens_fuzz::targets::blob_resigned::run(data));
