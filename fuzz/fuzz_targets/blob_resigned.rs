//! Valid blobs (the seed corpus: the fixtures and the shipped model in every dtype), mutated and re-signed
//! with a correct length and CRC so that mutations reach the header, the tensor table and the data.
#![no_main]

use libfuzzer_sys::fuzz_target;
use microlens::Model;

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    microlens_fuzz::resign(&mut bytes);
    if let Ok(model) = Model::from_bytes(&bytes) {
        microlens_fuzz::exercise(
            &model,
            data.get(data.len().saturating_sub(16)..).unwrap_or(&[]),
        );
    }
});
