//! Valid blobs (the seed corpus: the fixtures and the shipped model in every dtype), mutated and re-signed
//! with a correct length and CRC so that mutations reach the header, the tensor table and the data.

use microlens::Model;

/// One input of the target.
pub fn run(data: &[u8]) {
    let mut bytes = data.to_vec();
    crate::resign(&mut bytes);
    if let Ok(model) = Model::from_bytes(&bytes) {
        crate::exercise(
            &model,
            data.get(data.len().saturating_sub(16)..).unwrap_or(&[]),
        );
    }
}
