//! The logits hash that host and firmware both print (`logits_hash=<16 hex digits>`), to check that they
//! computed the same bits: FNV-1a 64 over the little-endian bytes of every `f32` logit, position by
//! position.

/// FNV-1a 64 offset basis.
const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64 prime.
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// Streaming FNV-1a 64: `h = (h ^ byte) * prime` for every byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Fnv1a64(OFFSET_BASIS)
    }
}

impl Fnv1a64 {
    /// The empty hash.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(PRIME);
        }
    }

    /// Feeds the little-endian bytes of every value, in order.
    pub fn write_f32s(&mut self, values: &[f32]) {
        values.iter().for_each(|v| self.write(&v.to_le_bytes()));
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// The hash of every position's logits, in order.
pub fn logits_hash<'a>(positions: impl IntoIterator<Item = &'a [f32]>) -> u64 {
    let mut h = Fnv1a64::new();
    positions
        .into_iter()
        .for_each(|logits| h.write_f32s(logits));
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_reference_values() {
        let hash = |bytes: &[u8]| {
            let mut h = Fnv1a64::new();
            h.write(bytes);
            h.finish()
        };
        assert_eq!(hash(b""), 0xcbf29ce484222325);
        assert_eq!(hash(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(hash(b"foobar"), 0x85944171f73967e8);
        let one_two = logits_hash([&[1.0f32][..], &[2.0f32][..]]);
        assert_eq!(one_two, hash(&[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40]));
    }
}
