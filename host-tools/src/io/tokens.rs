//! Token lists as the CLI and token files write them: comma-separated non-negative integers, one
//! sequence per line in a file.

use std::path::Path;

use anyhow::{ensure, Context, Result};

/// Parses `3,1,4` (spaces allowed).
pub fn parse_tokens(s: &str) -> Result<Vec<u32>> {
    s.split(',')
        .map(|t| {
            t.trim().parse::<u32>().with_context(|| {
                format!(
                    "token {:?} is not a non-negative integer",
                    crate::excerpt::excerpt(t.trim())
                )
            })
        })
        .collect()
}

/// One sequence per non-empty line of comma-separated token ids.
pub fn read_token_file(path: &Path) -> Result<Vec<Vec<u32>>> {
    let text = super::files::read_text(path, super::files::TextKind::Tokens)?;
    let seqs: Vec<Vec<u32>> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            parse_tokens(line).with_context(|| format!("{}:{}", path.display(), i + 1))
        })
        .collect::<Result<_>>()?;
    ensure!(
        !seqs.is_empty(),
        "{} holds no token sequence",
        path.display()
    );
    Ok(seqs)
}
