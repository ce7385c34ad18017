//! The logits hash that host and firmware both print (`logits_hash=<16 hex digits>`): the core's
//! [`microlens::hash`], and the line that prints it.

pub use microlens::hash::{logits_hash, Fnv1a64};

/// The line both sides print: `logits_hash=` and 16 lowercase hex digits.
pub fn hash_line(hash: u64) -> String {
    format!("logits_hash={hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_line_is_16_hex_digits() {
        assert_eq!(hash_line(0xab), "logits_hash=00000000000000ab");
    }
}
