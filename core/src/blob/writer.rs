//! Blob writing (feature `std`): the inverse of [`super::Blob::parse`], used by the host converter.

use std::vec::Vec;

use super::{
    align_up, header::Trailer, Activations, Blob, DType, Header, Preamble, Processing, TensorEntry,
    TokenizerRecord, CRC, PREAMBLE_LEN, VERSION,
};
use crate::config::Config;
use crate::error::{Error, Inconsistency};
use crate::tensors::{Catalogue, TensorId};

/// One tensor to write, already in blob layout and encoded in its dtype.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorData {
    /// Which tensor.
    pub id: TensorId,
    /// Storage type of `data`.
    pub dtype: DType,
    /// `[rows, cols]`.
    pub shape: [usize; 2],
    /// Encoded values, row-major (the writer stores an `I8` matrix in the blob's quad layout,
    /// [`super::quads`]: [`TensorData::blob_data`]).
    pub data: Vec<u8>,
    /// Quantisation scales (empty for `f32` and `f16`), each exactly an `f16` (stored as one).
    pub scales: Vec<f32>,
}

impl TensorData {
    /// The encoded values as the blob stores them: an `I8` matrix in quads of rows
    /// ([`super::quads::from_row_major`]), every other dtype as it is.
    pub fn blob_data(&self) -> std::borrow::Cow<'_, [u8]> {
        match self.dtype {
            DType::I8 => {
                let [rows, cols] = self.shape;
                super::quads::from_row_major(rows, cols, &self.data).into()
            }
            _ => self.data.as_slice().into(),
        }
    }
}

fn pad_to(buf: &mut Vec<u8>, align_from: usize) {
    while (buf.len() + align_from) % super::ALIGN != 0 {
        buf.push(0);
    }
}

fn u32_of(n: usize) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| Error::Inconsistent(Inconsistency::Layout))
}

/// Writes a blob. `tensors` may come in any order; every tensor the config needs must be there once.
pub fn write(
    config: &Config,
    processing: Processing,
    activations: Activations,
    tensors: &[TensorData],
) -> Result<Vec<u8>, Error> {
    config.validate()?;
    let catalogue = Catalogue::new(config);
    if tensors.len() != catalogue.len() {
        return Err(Error::Inconsistent(Inconsistency::TensorCount {
            expected: catalogue.len(),
            found: tensors.len(),
        }));
    }
    let mut table = Vec::with_capacity(catalogue.len() * super::ENTRY_LEN);
    let mut data = Vec::new();
    for (index, id) in catalogue.ids().enumerate() {
        let t = tensors
            .iter()
            .find(|t| t.id == id)
            .ok_or(Error::Inconsistent(Inconsistency::TensorOrder { index }))?;
        let entry = append_tensor(&mut data, index, t)?;
        table.extend_from_slice(&entry.encode()?);
    }
    let header = Header {
        config: *config,
        processing,
        activations,
        tensors: &table,
        tokenizer: None,
        integer: None,
    };
    seal(&header, &data)
}

/// The blob `blob` with its tokenizer record replaced by `tokenizer` (`None`: removed); the config,
/// tensors and data are the same bytes.
pub fn with_tokenizer(blob: &[u8], tokenizer: Option<TokenizerRecord>) -> Result<Vec<u8>, Error> {
    let parsed = Blob::parse(blob)?;
    let header = Header {
        tokenizer,
        ..parsed.header
    };
    seal(&header, parsed.data)
}

/// The blob `blob` computing in `activations`, with the integer plan `plan` (`None`: none; required
/// by [`Activations::Integer`], which [`crate::Model::from_bytes`] checks); the config, tensors, tokenizer
/// record and data are the same bytes.
pub fn with_arithmetic(
    blob: &[u8],
    activations: Activations,
    plan: Option<&[u8]>,
) -> Result<Vec<u8>, Error> {
    let parsed = Blob::parse(blob)?;
    let header = Header {
        activations,
        integer: plan,
        ..parsed.header
    };
    seal(&header, parsed.data)
}

/// Appends tensor `t` (the `index`-th of the catalogue) to the data section, its data then its scales
/// (an `I8` matrix that takes a centred input followed by its row sums), each aligned, and returns its
/// table entry.
fn append_tensor(data: &mut Vec<u8>, index: usize, t: &TensorData) -> Result<TensorEntry, Error> {
    pad_to(data, 0);
    let offset = data.len();
    data.extend_from_slice(&t.blob_data());
    pad_to(data, 0);
    let scales_offset = if t.scales.is_empty() { 0 } else { data.len() };
    let scales_start = data.len();
    for &s in &t.scales {
        let bytes =
            super::encode_scale(s).ok_or(Error::Inconsistent(Inconsistency::Scale { index }))?;
        data.extend_from_slice(&bytes);
    }
    if t.dtype == DType::I8 && !t.scales.is_empty() && t.id.kind.takes_centred_input() {
        for sum in row_sums(t).ok_or(Error::Inconsistent(Inconsistency::Length { index }))? {
            data.extend_from_slice(&sum.to_le_bytes());
        }
    }
    Ok(TensorEntry {
        kind: t.id.kind,
        layer: u16::try_from(t.id.layer)
            .map_err(|_| Error::Inconsistent(Inconsistency::TensorOrder { index }))?,
        dtype: t.dtype,
        rows: u32_of(t.shape[0])?,
        cols: u32_of(t.shape[1])?,
        offset: u32_of(offset)?,
        len: u32_of(t.data.len())?,
        scales_offset: u32_of(scales_offset)?,
        scales_len: u32_of(data.len() - scales_start)?,
    })
}

/// The exact row sums `sum_c W[r][c]` of an `I8` tensor's row-major bytes (`None` if they do not make
/// whole rows of its shape, or a sum would not fit an `i32`).
fn row_sums(t: &TensorData) -> Option<Vec<i32>> {
    let [rows, cols] = t.shape;
    if t.data.len() != rows.checked_mul(cols)? {
        return None;
    }
    (0..rows)
        .map(|r| {
            let row = t.data.get(r * cols..(r + 1) * cols)?;
            i32::try_from(row.iter().map(|&b| i64::from(b as i8)).sum::<i64>()).ok()
        })
        .collect()
}

/// The blob: the preamble (lengths and the CRC of the body), then the body: the postcard `header`,
/// padding to [`super::ALIGN`], and the data section.
fn seal(header: &Header<'_>, data: &[u8]) -> Result<Vec<u8>, Error> {
    let mut body = postcard::to_allocvec(header).map_err(|_| Error::BadHeader)?;
    let trailer = match (header.integer, &header.tokenizer) {
        (Some(plan), &tokenizer) => postcard::to_allocvec(&Trailer { tokenizer, plan }),
        (None, Some(t)) => postcard::to_allocvec(t),
        (None, None) => Ok(Vec::new()),
    };
    body.extend_from_slice(&trailer.map_err(|_| Error::BadHeader)?);
    let header_len = body.len();
    pad_to(&mut body, PREAMBLE_LEN);
    body.extend_from_slice(data);
    debug_assert_eq!(
        align_up(PREAMBLE_LEN + header_len),
        PREAMBLE_LEN + body.len() - data.len()
    );
    let preamble = Preamble {
        version: VERSION,
        flags: 0,
        header_len: u32_of(header_len)?,
        body_len: u32_of(body.len())?,
        crc32: CRC.checksum(&body),
    };
    let mut out = Vec::with_capacity(PREAMBLE_LEN + body.len());
    out.extend_from_slice(&preamble.encode());
    out.extend_from_slice(&body);
    Ok(out)
}
