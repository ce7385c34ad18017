//! Atomic file writes: a reader never sees a half-written file, and an error leaves the old one (through
//! symbolic links, with the umask's mode, never over a FIFO or device: [`super::files`]).

pub use super::files::write_atomically;
