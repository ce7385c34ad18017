//! The end-to-end tests, one test binary (one link of the host crates): checkpoint -> blob -> forward
//! against TransformerLens, and the shipped models on their users' tests.

mod byte_model;
mod forward;
mod shipped_model;
mod stories_model;
