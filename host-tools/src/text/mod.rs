//! Text in and out: a HuggingFace `tokenizer.json` ([`hf`]), llama2.c's `tokenizer.bin` ([`llama2c`]) or
//! the byte models' built-in byte tokenizer ([`bytes`]), behind one [`TextTokenizer`] with TransformerLens's BOS rule and `to_str_tokens`; the
//! tokens of a substring ([`span`]); windows of a text file ([`corpus`]). Below [`crate::eval`]: it knows
//! files and tokenizers, and of a model only its vocabulary size and tokenizer record.

pub mod bytes;
mod choice;
pub mod corpus;
pub mod hf;
pub mod llama2c;
pub mod span;
mod tokenizer;

pub use choice::{for_model, TextSide};
pub use tokenizer::{Encoded, TextTokenizer};
