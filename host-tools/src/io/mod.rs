//! Files in and out: `f32` safetensors, atomic writes, token lists. The bottom layer of the host tools: it
//! knows file formats, not models.

pub mod atomic;
pub mod safetensors;
pub mod tokens;
