//! The arguments every training command (`train-induction`, `train-facts`, `train-llama`) shares and
//! checks the same way before anything is generated or allocated.

use std::path::Path;

use anyhow::{ensure, Result};

/// Refuses a learning rate `--lr` that is not a positive finite number and an output `-o` that exists
/// and is not a directory.
pub fn check_lr_and_out(lr: f64, out: &Path) -> Result<()> {
    ensure!(
        lr.is_finite() && lr > 0.0,
        "--lr must be a positive finite number, not {lr}"
    );
    ensure!(
        !out.exists() || out.is_dir(),
        "-o {} exists and is not a directory",
        out.display()
    );
    Ok(())
}
