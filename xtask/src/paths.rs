//! Where things are in the repository.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository root (the host workspace).
pub fn root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = xtask.parent().unwrap_or(xtask);
        root.canonicalize().unwrap_or_else(|_| root.to_path_buf())
    })
}

/// The cargo running xtask (`$CARGO`, else `cargo` on `PATH`), in the repository's root, its builds
/// linted when `cargo xtask test` runs ([`crate::lint`]).
pub fn cargo() -> Command {
    let mut c = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    crate::lint::apply(&mut c);
    c
}

/// The firmware example, its own cargo project.
pub fn firmware_dir() -> PathBuf {
    root().join("firmware-example")
}

/// The host workspace's target directory: `CARGO_TARGET_DIR` if set, else `target/` at the root.
pub fn workspace_target_dir() -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root().join(dir),
        None => root().join("target"),
    }
}

/// Whether `program` is an executable file on `PATH` (or an existing path, if it has a slash).
pub fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    env::var_os("PATH")
        .is_some_and(|paths| env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}
