//! libFuzzer's entry to [`microlens_fuzz::targets::pth_pickle`].
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| microlens_fuzz::targets::pth_pickle::run(data));
