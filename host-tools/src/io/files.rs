//! Reading inputs safely: every read bounded by what the format declares (an endless stream such as
//! `/dev/zero` fails on its first bytes) or by a size limit checked before reading. Outputs:
//! [`super::output`].

use std::fs::File;
use std::io::Read;
use std::path::Path;

use anyhow::{ensure, Context, Result};
use microlens::blob::{declared_len, PREAMBLE_LEN};

/// What a text input is, and so the most bytes read of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    /// A model config (JSON): a few kilobytes; at most 1 MiB.
    Config,
    /// A token list or facts file (one sequence per line): at most 64 MiB.
    Tokens,
}

impl TextKind {
    /// The most bytes read of this kind of file.
    pub const fn limit(self) -> u64 {
        match self {
            TextKind::Config => 1 << 20,
            TextKind::Tokens => 64 << 20,
        }
    }

    fn name(self) -> &'static str {
        match self {
            TextKind::Config => "a config",
            TextKind::Tokens => "a token or facts file",
        }
    }
}

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

/// A text file of at most [`TextKind::limit`] bytes: a regular file's size is checked before reading,
/// a stream's while reading.
pub fn read_text(path: &Path, kind: TextKind) -> Result<String> {
    let f = open(path)?;
    let limit = kind.limit();
    let too_long = |size: &str| {
        anyhow::anyhow!(
            "{} is larger than the {} MiB allowed for {}{size}",
            path.display(),
            limit >> 20,
            kind.name()
        )
    };
    if let Ok(meta) = f.metadata() {
        if meta.is_file() && meta.len() > limit {
            let mib = meta.len() as f64 / (1u64 << 20) as f64;
            return Err(too_long(&format!(" ({mib:.1} MiB)")));
        }
    }
    let mut bytes = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() as u64 > limit {
        return Err(too_long(""));
    }
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

/// A file whose first bytes declare its length: up to `head` bytes are read, `declared` turns them
/// into the total length, then the rest is read up to it plus one byte (so trailing data reaches the
/// parser, which reports it).
pub fn read_declared(
    path: &Path,
    head: usize,
    declared: impl Fn(&[u8]) -> Result<usize>,
) -> Result<Vec<u8>> {
    let mut f = open(path)?;
    let mut bytes = read_at_most((&mut f).take(head as u64), head as u64, path)?;
    let total = declared(&bytes).with_context(|| path.display().to_string())?;
    let rest = total.saturating_sub(bytes.len()) as u64 + 1;
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
