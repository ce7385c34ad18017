//! Every file the CLI writes goes through here, whichever option named it (`-o`, `--cache`, `--plot`,
//! a training directory):
//!
//! - never onto an input: an output that is the same file as one of the command's inputs (same device
//!   and inode: through symbolic links, hard links, `./` paths) is refused, before the work and again
//!   just before the rename;
//! - never over a FIFO, a device or a directory (even through a link);
//! - atomically: a temporary `.microlens-*` file beside the file the path resolves to (a symbolic link
//!   is written through and stays a link), renamed over it; an error removes the temporary file, and so
//!   does SIGINT, SIGTERM or SIGHUP ([`super::interrupt`]);
//! - with the mode of the file replaced, or `0666` less the umask for a new one.
//!
//! ```no_run
//! # use std::path::Path;
//! # fn main() -> anyhow::Result<()> {
//! use microlens_host::io::output::Outputs;
//! let outputs = Outputs::with_inputs([Path::new("model.mlb"), Path::new("facts.txt")]);
//! outputs.check(Path::new("edited.mlb"))?; // early, before any work
//! // ... the work ...
//! outputs.write(Path::new("edited.mlb"), b"bytes")?;
//! # Ok(())
//! # }
//! ```

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};

use super::interrupt::{self, Registered};

/// The inputs of one command: what its outputs must never be.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    inputs: Vec<PathBuf>,
}

impl Outputs {
    /// No inputs (a command that only writes, such as training).
    pub fn new() -> Self {
        Self::default()
    }

    /// These inputs (a path that does not exist is skipped: reading it fails on its own).
    pub fn with_inputs<'a>(inputs: impl IntoIterator<Item = &'a Path>) -> Self {
        let mut outputs = Self::new();
        for path in inputs {
            outputs.input(path);
        }
        outputs
    }

    /// Adds an input.
    pub fn input(&mut self, path: &Path) -> &mut Self {
        self.inputs.push(path.to_path_buf());
        self
    }

    /// Refuses `out` if it exists and is not a regular file (a FIFO, a device, a directory, even through
    /// a link), or if it is one of the inputs (same device and inode, whatever the path).
    pub fn check(&self, out: &Path) -> Result<()> {
        let Ok(meta) = std::fs::metadata(out) else {
            return Ok(());
        };
        ensure!(
            meta.is_file(),
            "{} exists and is not a regular file: refusing to write it",
            out.display()
        );
        for input in &self.inputs {
            if std::fs::metadata(input).is_ok_and(|m| same_file(&m, &meta)) {
                bail!(
                    "output {} is an input ({}): refusing to overwrite it",
                    out.display(),
                    input.display()
                );
            }
        }
        Ok(())
    }

    /// Checks `out`, then opens a temporary file for it in the directory of the file it resolves to;
    /// nothing reaches `out` before [`Pending::commit`].
    pub fn create(&self, out: &Path) -> Result<Pending> {
        self.check(out)?;
        let target = resolved(out);
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let existing = std::fs::metadata(&target).ok();
        let mode = match &existing {
            Some(m) => Some(m.permissions()),
            None => default_permissions(),
        };
        let suffix = target
            .extension()
            .map(|e| format!(".{}", e.to_string_lossy()))
            .unwrap_or_default();
        // The name is registered before the file exists: a signal at any instant finds it.
        let mut registered = None;
        let tmp = tempfile::Builder::new()
            .prefix(".microlens-")
            .suffix(&suffix)
            .make_in(dir, |path| {
                let guard = interrupt::register(path);
                let file = create_new(path, mode.as_ref())?;
                registered = Some(guard);
                Ok(file)
            })
            .with_context(|| format!("cannot write in {}", dir.display()))?;
        Ok(Pending {
            tmp,
            _registered: registered,
            target,
            shown: out.to_path_buf(),
            // The mode asked for at creation was cut by the umask: an existing file gets its own back.
            keep_mode: existing.and(mode),
            outputs: self.clone(),
        })
    }

    /// Writes `bytes` to `out` atomically ([`Outputs::create`], write, [`Pending::commit`]).
    pub fn write(&self, out: &Path, bytes: &[u8]) -> Result<()> {
        let mut pending = self.create(out)?;
        pending
            .file()
            .write_all(bytes)
            .with_context(|| format!("cannot write {}", out.display()))?;
        pending.commit()
    }
}

/// Writes `bytes` to `path` atomically, for a command without inputs ([`Outputs::write`]).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    Outputs::new().write(path, bytes)
}

/// An output being written: a temporary file beside its target, removed if dropped uncommitted.
#[derive(Debug)]
pub struct Pending {
    tmp: tempfile::NamedTempFile,
    _registered: Option<Registered>,
    target: PathBuf,
    shown: PathBuf,
    keep_mode: Option<std::fs::Permissions>,
    outputs: Outputs,
}

impl Pending {
    /// The temporary file's path (same extension as the output), for writers that take a path.
    pub fn path(&self) -> &Path {
        self.tmp.path()
    }

    /// The temporary file, for writers that take a file.
    pub fn file(&mut self) -> &mut File {
        self.tmp.as_file_mut()
    }

    /// Flushes the temporary file to disk, checks the output again against the inputs and renames the
    /// temporary file over it.
    pub fn commit(self) -> Result<()> {
        let shown = self.shown.display().to_string();
        let file = self.tmp.as_file();
        file.sync_all()
            .with_context(|| format!("cannot write {shown}"))?;
        if let Some(mode) = self.keep_mode {
            file.set_permissions(mode)
                .with_context(|| format!("cannot write {shown}"))?;
        }
        self.outputs.check(&self.shown)?;
        self.tmp
            .persist(&self.target)
            .with_context(|| format!("cannot write {shown}"))?;
        Ok(())
    }
}

/// The file `path` names after following symbolic links (itself if it does not exist yet; a dangling
/// link's target).
fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::read_link(&p) {
            Ok(target) => p = p.parent().unwrap_or(Path::new(".")).join(target),
            Err(_) => break,
        }
    }
    p
}

#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    (a.dev(), a.ino()) == (b.dev(), b.ino())
}

#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    false
}

/// Creates `path`, which must not exist, for reading and writing, with `mode` where the platform has
/// modes.
fn create_new(path: &Path, mode: Option<&std::fs::Permissions>) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create_new(true);
    #[cfg(unix)]
    if let Some(m) = mode {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(m.mode());
    }
    #[cfg(not(unix))]
    let _ = mode;
    options.open(path)
}

/// `0666`, which the umask cuts at creation (tempfile's own default is `0600`).
#[cfg(unix)]
fn default_permissions() -> Option<std::fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(std::fs::Permissions::from_mode(0o666))
}

#[cfg(not(unix))]
fn default_permissions() -> Option<std::fs::Permissions> {
    None
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn an_uncommitted_output_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("x.png");
        let mut p = Outputs::new().create(&out).unwrap();
        p.file().write_all(b"half").unwrap();
        assert!(p.path().extension().is_some_and(|e| e == "png"));
        drop(p);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn an_input_by_any_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        std::fs::write(&input, b"keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        let outputs = Outputs::with_inputs([input.as_path()]);
        for out in [&input, &link, &dir.path().join(".").join("in")] {
            assert!(outputs.write(out, b"new").is_err(), "{}", out.display());
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"keep");
        // Another file is written, through a link to it.
        let other = dir.path().join("other");
        std::fs::write(&other, b"old").unwrap();
        let to_other = dir.path().join("to-other");
        std::os::unix::fs::symlink(&other, &to_other).unwrap();
        outputs.write(&to_other, b"new").unwrap();
        assert_eq!(std::fs::read(&other).unwrap(), b"new");
        assert!(to_other.symlink_metadata().unwrap().is_symlink());
    }
}
