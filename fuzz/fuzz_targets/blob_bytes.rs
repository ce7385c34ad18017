//! Raw bytes as a blob: `Model::from_bytes`, then a few steps with hostile hooks if it reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use microlens::Model;

fuzz_target!(|data: &[u8]| {
    if let Ok(model) = Model::from_bytes(data) {
        microlens_fuzz::exercise(&model, data);
    }
});
