//! `cargo xtask bench-peers [--runs N] [--python P]`: microlens beside candle and TransformerLens on the
//! shipped model, in one run (`host-tools/benches/peers`): decode batch 1 with KV cache, full forward
//! batch 64 on 1 and 2 threads, 1024 x 64 tokens; prints a markdown table with the ratios.
//! TransformerLens is measured where the given Python (default `python3`) imports `transformer_lens`,
//! skipped with a line saying so otherwise (CI needs no Python). With `--python P`, then the Python
//! package's `run_with_cache` beside TransformerLens's in `P` (`bindings/python/benches/run_with_cache.py`:
//! 64 x 64 tokens, every hook, 1 and 2 threads; peak RSS of one hook against all).

use std::process::Command;

use anyhow::Result;

use crate::paths::root;
use crate::toolchain::run_status;

/// Arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Timed runs per figure (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// The Python that runs TransformerLens (a virtualenv's, say).
    #[arg(long)]
    pub python: Option<String>,
}

/// Builds and runs the peers benchmark.
pub fn run(args: Args) -> Result<()> {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(root())
        .args(["bench", "-p", "microlens-host", "--bench", "peers"])
        .env("MICROLENS_PEERS_RUNS", args.runs.to_string());
    if let Some(python) = &args.python {
        cmd.env("MICROLENS_PYTHON", python);
    }
    run_status(&mut cmd)?;
    // The Python package's `run_with_cache` beside TransformerLens's, in the given Python.
    let Some(python) = args.python else {
        println!(
            "run_with_cache of the Python package: skipped (give --python P with transformer-lens)"
        );
        return Ok(());
    };
    let staging = crate::python::stage("python")?;
    run_status(
        Command::new(python)
            .current_dir(root())
            .arg("bindings/python/benches/run_with_cache.py")
            .args(["--runs", &args.runs.to_string()])
            .env("PYTHONPATH", staging),
    )
}
