//! The shipped induction model is reproducible: `microlens train-induction` with its defaults (the shipped
//! recipe) writes `firmware-example/model/induction-2l.{safetensors,json}` byte for byte.

use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::paths::{root, workspace_target_dir};
use crate::toolchain::run_status;

/// The shipped model's files, from the repository root.
const SHIPPED: [&str; 2] = [
    "firmware-example/model/induction-2l.safetensors",
    "firmware-example/model/induction-2l.json",
];

/// Trains the shipped recipe into the target directory and compares its files with the shipped ones.
pub fn shipped_model() -> Result<()> {
    let tool = crate::host_tool::build()?;
    let out = workspace_target_dir().join("xtask-reproduce");
    let _ = std::fs::remove_dir_all(&out);
    run_status(
        Command::new(&tool)
            .current_dir(root())
            .arg("train-induction")
            .arg("-o")
            .arg(&out),
    )?;
    for shipped in SHIPPED {
        let name = std::path::Path::new(shipped)
            .file_name()
            .context("a file name")?;
        let trained = std::fs::read(out.join(name)).with_context(|| format!("{name:?}"))?;
        let expected = std::fs::read(root().join(shipped)).with_context(|| shipped.to_string())?;
        if trained != expected {
            bail!(
                "`microlens train-induction` wrote a different {} than {shipped}: the shipped recipe \
                 (its defaults) no longer reproduces the shipped model",
                out.join(name).display()
            );
        }
        println!("{shipped}: reproduced byte for byte");
    }
    Ok(())
}
