//! Token batches handed over from numpy: `[batch, pos]` `uint32` rows, checked against the model as
//! the `microlens` command checks a token list.

use anyhow::{Context, Result};
use microlens::Model;
use microlens_host::eval::run::check_tokens;
use numpy::PyReadonlyArray2;

/// The rows of `tokens`, copied out of the array (so the forward passes run without the GIL).
pub fn rows(tokens: &PyReadonlyArray2<'_, u32>) -> Vec<Vec<u32>> {
    tokens
        .as_array()
        .rows()
        .into_iter()
        .map(|r| r.to_vec())
        .collect()
}

/// Checks every row against `model` (length, vocabulary), naming the row when there are several.
pub fn check(model: &Model<'_>, rows: &[Vec<u32>]) -> Result<()> {
    for (i, row) in rows.iter().enumerate() {
        let checked = check_tokens(model, row);
        match rows.len() {
            1 => checked?,
            _ => checked.with_context(|| format!("sequence {i} of the batch"))?,
        }
    }
    Ok(())
}
