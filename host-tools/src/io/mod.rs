//! Files in and out: bounded reads, the output discipline (atomic, never onto an input), `f32`
//! safetensors, token lists. The bottom layer of the host tools: it knows file formats, not models.

pub mod files;
pub mod interrupt;
pub mod output;
pub mod safetensors;
pub mod tokens;
