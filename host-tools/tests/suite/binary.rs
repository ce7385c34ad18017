//! The `microlens` binary as the command-line tests run it, and what they check of its output.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `microlens args` to its end.
pub fn microlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_microlens"))
        .args(args)
        .output()
        .expect("microlens runs")
}

/// The stdout of a run that must have succeeded (its stderr in the failure).
pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A failure: a non-zero exit that is not a panic (101) or a signal, and exactly one line on stderr,
/// which mentions `mentions`.
#[track_caller]
pub fn one_line_error(o: &Output, mentions: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "expected failure, got success: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let code = o.status.code();
    assert!(
        code.is_some() && code != Some(101),
        "exit {:?} (panic or signal): {err}",
        o.status
    );
    assert_eq!(err.trim_end().lines().count(), 1, "stderr: {err}");
    assert!(err.contains(mentions), "{mentions:?} not in: {err}");
}

/// `tests/fixtures/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `microlens convert ckpt -o dir/<stem>-<dtype>.mlb --dtype dtype` and `extra`, which must succeed;
/// returns the blob's path.
pub fn convert_to(dir: &Path, ckpt: &Path, stem: &str, dtype: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(format!("{stem}-{dtype}.mlb"));
    let args = ["convert", s(ckpt), "-o", s(&out), "--dtype", dtype];
    ok(&microlens(&[args.as_slice(), extra].concat()));
    out
}
