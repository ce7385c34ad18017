//! Reading inputs and writing outputs safely: every read bounded by what the format declares (an endless
//! stream such as `/dev/zero` fails on its first bytes), outputs written atomically through symbolic
//! links with the umask's mode, never over a FIFO, a device or one of the command's own inputs.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use microlens::blob::{declared_len, PREAMBLE_LEN};

/// Largest config or token file read (bytes).
pub const MAX_TEXT_BYTES: u64 = 256 << 20;
/// Largest safetensors header (bytes), as the safetensors format itself limits it.
pub const MAX_SAFETENSORS_HEADER: u64 = 100_000_000;

/// Reads at most `limit` bytes of `r`; more is an error.
fn read_at_most(mut r: impl Read, limit: u64, path: &Path) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    r.by_ref()
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .with_context(|| format!("cannot read {}", path.display()))?;
    ensure!(
        out.len() as u64 <= limit,
        "{} is longer than {limit} bytes",
        path.display()
    );
    Ok(out)
}

fn open(path: &Path) -> Result<File> {
    File::open(path).with_context(|| format!("cannot read {}", path.display()))
}

/// A text file (config, token list) of at most [`MAX_TEXT_BYTES`].
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = read_at_most(open(path)?, MAX_TEXT_BYTES, path)?;
    String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8 text", path.display()))
}

/// A file of at most `limit` bytes: a regular file's size is checked before anything is read, any other
/// file (a pipe, a device) is read up to the bound.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let f = open(path)?;
    let meta = f
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    ensure!(
        !meta.is_dir(),
        "{} is a directory, not a file",
        path.display()
    );
    ensure!(
        !meta.is_file() || meta.len() <= limit,
        "{} is {} bytes, more than the {limit} accepted",
        path.display(),
        meta.len()
    );
    read_at_most(f, limit, path)
}

/// A blob: the preamble first (a file that is not a blob fails on its magic), then exactly the length it
/// declares, plus one byte so that trailing data is reported by the parser.
pub fn read_blob(path: &Path) -> Result<Vec<u8>> {
    let mut f = open(path)?;
    let mut bytes = read_at_most(
        (&mut f).take(PREAMBLE_LEN as u64),
        PREAMBLE_LEN as u64,
        path,
    )?;
    let total = declared_len(&bytes).with_context(|| path.display().to_string())?;
    let rest = (total - PREAMBLE_LEN) as u64 + 1;
    f.take(rest)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(bytes)
}

/// A checkpoint: a `.pth` (zip) must be a regular file (its directory is at its end); a safetensors file
/// is read as far as its header declares (8-byte length, JSON header, then the data its offsets name).
pub fn read_checkpoint(path: &Path) -> Result<Vec<u8>> {
    let mut f = open(path)?;
    let mut bytes = read_at_most((&mut f).take(8), 8, path)?;
    if bytes.starts_with(b"PK\x03\x04") {
        let meta = f
            .metadata()
            .with_context(|| format!("cannot read {}", path.display()))?;
        ensure!(
            meta.is_file(),
            "{} is a zip (.pth) but not a regular file",
            path.display()
        );
        f.read_to_end(&mut bytes)
            .with_context(|| format!("cannot read {}", path.display()))?;
        return Ok(bytes);
    }
    let not_st = |why: &str| {
        anyhow::anyhow!(
            "{} is neither safetensors nor a .pth zip: {why}",
            path.display()
        )
    };
    let Ok(len) = <[u8; 8]>::try_from(bytes.as_slice()) else {
        return Err(not_st("shorter than 8 bytes"));
    };
    let header_len = u64::from_le_bytes(len);
    if header_len == 0 || header_len > MAX_SAFETENSORS_HEADER {
        return Err(not_st(&format!("header length {header_len}")));
    }
    let header = read_at_most((&mut f).take(header_len), header_len, path)?;
    ensure!(
        header.len() as u64 == header_len,
        "{} is truncated: its safetensors header is shorter than the {header_len} bytes declared",
        path.display()
    );
    let json: serde_json::Value = serde_json::from_slice(&header)
        .map_err(|e| not_st(&format!("the header is not JSON ({e})")))?;
    let data_len = json
        .as_object()
        .ok_or_else(|| not_st("the header is not a JSON object"))?
        .values()
        .filter_map(|t| t.get("data_offsets")?.as_array()?.get(1)?.as_u64())
        .max()
        .unwrap_or(0);
    bytes.extend_from_slice(&header);
    f.take(data_len.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(bytes)
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

/// Refuses an output that exists and is not a regular file (a FIFO, a device, a directory, even through
/// a link), or that is one of `inputs` (same device and inode, whatever the path).
pub fn check_output(out: &Path, inputs: &[&Path]) -> Result<()> {
    let Ok(meta) = std::fs::metadata(out) else {
        return Ok(());
    };
    ensure!(
        meta.is_file(),
        "{} exists and is not a regular file: refusing to write it",
        out.display()
    );
    for input in inputs {
        if let Ok(m) = std::fs::metadata(input) {
            if same_file(&m, &meta) {
                bail!(
                    "output {} is an input ({}): refusing to overwrite it",
                    out.display(),
                    input.display()
                );
            }
        }
    }
    Ok(())
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

/// Writes `bytes` to `path` atomically: a temporary file beside the file `path` resolves to (through
/// symbolic links), renamed over it. An existing file keeps its mode; a new one gets `0666` less the
/// umask. A non-regular `path` is refused.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    check_output(path, &[])?;
    let target = resolved(path);
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".microlens-");
    let existing = std::fs::metadata(&target).ok();
    let perms = match &existing {
        Some(m) => Some(m.permissions()),
        None => default_permissions(),
    };
    if let Some(p) = &perms {
        builder.permissions(p.clone());
    }
    let mut tmp = builder
        .tempfile_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    if let (Some(_), Some(p)) = (&existing, perms) {
        // The mode asked for at creation was cut by the umask: give an existing file its own back.
        tmp.as_file()
            .set_permissions(p)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    tmp.persist(&target)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
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
