//! libFuzzer's entry to [`microlens_fuzz::targets::blob_bytes`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| microlens_fuzz::targets::blob_bytes::run(data));
