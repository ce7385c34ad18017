//! The postcard header: config, processing record, quantisation mode and the tensor table.

use serde::{Deserialize, Serialize};

use super::dtype::Activations;
use crate::config::{Config, Normalization};

/// Which of TransformerLens's `process_weights_` steps were applied by the converter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Processing {
    /// LayerNorm weights and biases folded into the following matrices.
    pub fold_ln: bool,
    /// Writing weights (`W_E`, `W_pos`, `W_O`, `b_O`, `W_out`, `b_out`) centred over `d_model`.
    pub center_writing_weights: bool,
    /// `W_U` and `b_U` centred over the vocabulary.
    pub center_unembed: bool,
    /// `b_V` folded into `b_O`.
    pub fold_value_biases: bool,
    /// The normalisation of the checkpoint, before folding.
    pub original_normalization: Normalization,
}

impl Processing {
    /// None of the steps applied: the checkpoint's weights as they were (TransformerLens's
    /// `from_pretrained_no_processing`), from a checkpoint with `original_normalization`.
    pub const fn none(original_normalization: Normalization) -> Self {
        Processing {
            fold_ln: false,
            center_writing_weights: false,
            center_unembed: false,
            fold_value_biases: false,
            original_normalization,
        }
    }
}

/// The tokenizer a blob was converted with: a record after the header's other fields, present only
/// when the converter had a tokenizer (older blobs, and blobs without one, end before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TokenizerRecord {
    /// FNV-1a 64 of the tokenizer file's bytes (a HuggingFace `tokenizer.json`).
    pub fnv1a64: u64,
    /// TransformerLens's `default_prepend_bos`: whether text gets a BOS token unless told otherwise.
    pub prepend_bos: bool,
}

/// Everything in a blob but the tensor data.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header<'a> {
    /// The architecture of the computation the blob holds.
    pub config: Config,
    /// How the weights were processed.
    pub processing: Processing,
    /// Activation arithmetic and KV cache type.
    pub activations: Activations,
    /// The tensor table: one [`super::TensorEntry`] of [`super::ENTRY_LEN`] bytes per tensor, in
    /// [`crate::tensors::Catalogue`] order.
    pub tensors: &'a [u8],
    /// The tokenizer record, encoded after the fields above when present (`None`: nothing follows them).
    #[serde(skip)]
    pub tokenizer: Option<TokenizerRecord>,
    /// The integer plan of a blob of the integer-only arithmetic ([`crate::integer::plan`]), encoded
    /// with the tokenizer record in a [`Trailer`] after the fields above.
    #[serde(skip)]
    pub integer: Option<&'a [u8]>,
}

/// What follows the header's fields in a blob with an integer plan (older blobs hold nothing there, or a
/// bare [`TokenizerRecord`], at most 11 bytes, which no trailer is).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Trailer<'a> {
    /// The tokenizer record.
    pub tokenizer: Option<TokenizerRecord>,
    /// The integer plan's bytes.
    pub plan: &'a [u8],
}
