//! One row of the tensor table: a fixed-size postcard record, so entry `i` is at byte `i * ENTRY_LEN`.

use serde::{Deserialize, Serialize};

use super::dtype::DType;
use crate::error::Error;
use crate::tensors::{TensorId, TensorKind};

/// Encoded size of a [`TensorEntry`] in bytes.
pub const ENTRY_LEN: usize = 28;

/// Where one tensor's bytes are, and how to read them. Offsets are relative to the data section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorEntry {
    /// What the tensor is.
    pub kind: TensorKind,
    /// Its layer (0 outside the blocks).
    #[serde(with = "postcard::fixint::le")]
    pub layer: u16,
    /// Storage type.
    pub dtype: DType,
    /// Rows (outputs).
    #[serde(with = "postcard::fixint::le")]
    pub rows: u32,
    /// Columns (inputs).
    #[serde(with = "postcard::fixint::le")]
    pub cols: u32,
    /// Offset of the values in the data section.
    #[serde(with = "postcard::fixint::le")]
    pub offset: u32,
    /// Bytes of values.
    #[serde(with = "postcard::fixint::le")]
    pub len: u32,
    /// Offset of the `f16` scales in the data section (0 if none).
    #[serde(with = "postcard::fixint::le")]
    pub scales_offset: u32,
    /// Bytes of scales (0 if none).
    #[serde(with = "postcard::fixint::le")]
    pub scales_len: u32,
}

impl TensorEntry {
    /// The tensor this entry describes.
    pub fn id(&self) -> TensorId {
        TensorId {
            kind: self.kind,
            layer: self.layer as usize,
        }
    }

    /// Decodes the entry at `index` of a tensor table. The record's layout is fixed (postcard's, with
    /// every variant index below 128 and so one byte), so it is read field by field: the same result as
    /// `postcard::from_bytes`, without its deserializer. One out-of-line copy for the table's readers
    /// (`Model::from_bytes`, `Model::entries`); the forward pass's lookups inline `TensorEntry::read`.
    #[inline(never)]
    pub fn decode(table: &[u8], index: usize) -> Result<Self, Error> {
        Self::read(table, index)
    }

    crate::arch::on_assembly_targets! {
        inline(always), else inline(never);
        /// [`TensorEntry::decode`] inlined, for the forward pass's lookups of its tensors each step
        /// (`Model::matrix`, `Model::vector`): the fields they do not use are never read, and nothing goes
        /// through memory (M4F int8: 604 fewer instructions per token for 504 B more flash). Only on the
        /// cores with the DSP instructions: elsewhere the inlined lookups' frames cost the small cores'
        /// stack more than they save (the Cortex-M0's f32 build: 256 B more).
        pub(crate) fn read(table: &[u8], index: usize) -> Result<Self, Error> {
            let start = index.checked_mul(ENTRY_LEN).ok_or(Error::BadHeader)?;
            let b: &[u8; ENTRY_LEN] = table
                .get(start..start.saturating_add(ENTRY_LEN))
                .and_then(|b| b.try_into().ok())
                .ok_or(Error::BadHeader)?;
            let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
            Ok(TensorEntry {
                kind: *TensorKind::ALL.get(b[0] as usize).ok_or(Error::BadHeader)?,
                layer: u16::from_le_bytes([b[1], b[2]]),
                dtype: *DType::ALL.get(b[3] as usize).ok_or(Error::BadHeader)?,
                rows: u32_at(4),
                cols: u32_at(8),
                offset: u32_at(12),
                len: u32_at(16),
                scales_offset: u32_at(20),
                scales_len: u32_at(24),
            })
        }
    }

    /// Encodes the entry into exactly [`ENTRY_LEN`] bytes.
    pub fn encode(&self) -> Result<[u8; ENTRY_LEN], Error> {
        let mut out = [0u8; ENTRY_LEN];
        match postcard::to_slice(self, &mut out) {
            Ok(used) if used.len() == ENTRY_LEN => Ok(out),
            _ => Err(Error::BadHeader),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::lcg;

    fn postcard_decode(bytes: &[u8]) -> Result<TensorEntry, Error> {
        match postcard::take_from_bytes::<TensorEntry>(bytes) {
            Ok((entry, [])) => Ok(entry),
            _ => Err(Error::BadHeader),
        }
    }

    #[test]
    fn field_by_field_equals_postcard() {
        let mut next = lcg(7);
        for i in 0..20_000u32 {
            let mut b = [0u8; ENTRY_LEN];
            for x in b.iter_mut() {
                *x = (next() >> 24) as u8;
            }
            // Mostly valid variant indices, sometimes not.
            if i % 4 != 0 {
                b[0] %= 24;
                b[3] %= 4;
            }
            assert_eq!(TensorEntry::decode(&b, 0), postcard_decode(&b), "{b:?}");
        }
        for (i, kind) in TensorKind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i);
        }
        for (i, dtype) in DType::ALL.iter().enumerate() {
            assert_eq!(*dtype as usize, i);
        }
    }
}
