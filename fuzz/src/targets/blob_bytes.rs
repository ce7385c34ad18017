//! Raw bytes as a blob: `Model::from_bytes`, then a few steps with hostile hooks if it reads.

use microlens::Model;

/// One input of the target.
pub fn run(data: &[u8]) {
    if let Ok(model) = Model::from_bytes(data) {
        crate::exercise(&model, data);
    }
}
