//! libFuzzer's entry to [`microlens_fuzz::targets::frame_decoder`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| microlens_fuzz::targets::frame_decoder::run(data));
