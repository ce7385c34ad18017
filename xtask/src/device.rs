//! The device's report: its `key=value` lines.

use anyhow::{Context, Result};

/// The lines the firmware printed.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Every line, in order.
    pub lines: Vec<String>,
}

impl Report {
    /// The value of the first `key=value` line: the text after `=` up to the first space.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.lines.iter().find_map(|line| {
            let rest = line.trim().strip_prefix(key)?.strip_prefix('=')?;
            rest.split_whitespace().next()
        })
    }

    /// `key`'s value, parsed.
    pub fn parse<T: std::str::FromStr>(&self, key: &str) -> Result<T> {
        let text = self
            .value(key)
            .with_context(|| format!("the device printed no {key}="))?;
        text.parse()
            .ok()
            .with_context(|| format!("the device printed {key}={text}, which does not parse"))
    }

    /// The prompt tokens (`prompt=3,1,4`).
    pub fn prompt(&self) -> Result<Vec<u32>> {
        self.tokens("prompt")
            .context("the device printed no prompt=")?
    }

    /// The comma-separated tokens of the `key=` line, if the device printed one (`continuation=` for a
    /// byte-level model).
    pub fn tokens(&self, key: &str) -> Option<Result<Vec<u32>>> {
        let text = self.value(key)?;
        let parsed = text.split(',').map(|t| {
            t.parse()
                .with_context(|| format!("bad token {t:?} in {key}={text}"))
        });
        Some(parsed.collect())
    }

    /// The logits hash (`logits_hash=<16 hex digits>`).
    pub fn logits_hash(&self) -> Result<u64> {
        let text = self
            .value("logits_hash")
            .context("the device printed no logits_hash=")?;
        u64::from_str_radix(text, 16).with_context(|| format!("bad logits_hash={text}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_values() {
        let r = Report {
            lines: [
                "prompt=3,1,4",
                "continuation=5,x",
                "accuracy=0.5 (1/2)",
                "logits_hash=00000000000000ab",
            ]
            .map(String::from)
            .to_vec(),
        };
        assert_eq!(r.prompt().unwrap(), [3, 1, 4]);
        assert_eq!(r.parse::<f32>("accuracy").unwrap(), 0.5);
        assert_eq!(r.logits_hash().unwrap(), 0xab);
        assert!(r.value("stack_bytes").is_none());
        assert!(r.tokens("continuation").unwrap().is_err());
        assert!(r.tokens("continuation_text").is_none());
    }
}
