//! The convert pipeline: a TransformerLens state dict, folded as TransformerLens does ([`fold`], with the
//! shortformer tables of [`shortformer`]), laid out as a blob and its tensors encoded
//! ([`crate::quantize::encode`]).

pub mod fold;
mod pipeline;
pub mod shortformer;

pub use pipeline::{
    config_path, convert, convert_into, convert_loaded, convert_state_dict, convert_to_file,
    inputs, with_kv, Conversion, ConvertOptions,
};

#[cfg(test)]
mod bad_input_tests;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
