//! Where the firmware's blob comes from: a given file, or a checkpoint converted by the host tool.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::paths::workspace_target_dir;
use crate::toolchain::run_status;

/// The blob step.
#[derive(Clone, Debug)]
pub enum BlobSource {
    /// A blob made elsewhere, embedded as is.
    Given(PathBuf),
    /// A checkpoint converted with `microlens convert` (TransformerLens weight processing, matrices
    /// stored as `dtype`).
    Convert {
        /// The checkpoint (safetensors or `.pth`).
        checkpoint: PathBuf,
        /// Its config JSON; by default `<checkpoint stem>.json` beside it if that exists, else the host
        /// tool's default (`config.json` beside it).
        config: Option<PathBuf>,
        /// Storage type of the matrices: `f32`, `f16`, `i8`, `i4` or `i8g`.
        dtype: String,
        /// Further `microlens convert` options, each a flag and its value (`--activations i16`,
        /// `--kv i16`, `--tables f16`); none: the dtype's defaults.
        options: Vec<(&'static str, String)>,
    },
}

impl BlobSource {
    /// Whether this step needs the host tool.
    pub fn needs_host_tool(&self) -> bool {
        matches!(self, BlobSource::Convert { .. })
    }

    /// The blob's path, after converting if needed (into `<target>/firmware/<name>-<dtype>.mlb`, or
    /// `<name>-<dtype>-a<activations>-k<kv>-t<tables>.mlb`).
    pub fn resolve(&self, host_tool: Option<&Path>) -> Result<PathBuf> {
        match self {
            BlobSource::Given(path) => path
                .canonicalize()
                .with_context(|| format!("blob {}", path.display())),
            BlobSource::Convert {
                checkpoint,
                config,
                dtype,
                options,
            } => {
                let tool = host_tool.context("converting needs the host tool")?;
                let stem = checkpoint
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("model");
                let dir = workspace_target_dir().join("firmware");
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                // `--activations i16` is `-ai16` in the file name, `--kv i16` `-ki16`.
                let (mut suffix, mut flag) = (String::new(), String::new());
                for (f, v) in options {
                    suffix += &format!("-{}{v}", f.trim_start_matches('-').get(..1).unwrap_or(""));
                    flag += &format!(" {f} {v}");
                }
                let out = dir.join(format!("{stem}-{dtype}{suffix}.mlb"));
                eprintln!(
                    "xtask: microlens convert {} --dtype {dtype}{flag}",
                    checkpoint.display()
                );
                let mut convert = Command::new(tool);
                convert
                    .arg("convert")
                    .arg(checkpoint)
                    .arg("--output")
                    .arg(&out)
                    .args(["--dtype", dtype]);
                for (f, v) in options {
                    convert.args([f, v.as_str()]);
                }
                let beside = checkpoint.with_extension("json");
                match config {
                    Some(config) => convert.arg("--config").arg(config),
                    None if beside.is_file() => convert.arg("--config").arg(beside),
                    None => &mut convert,
                };
                run_status(&mut convert)?;
                out.canonicalize()
                    .with_context(|| format!("blob {}", out.display()))
            }
        }
    }
}
