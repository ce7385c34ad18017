//! nRF52840 (Cortex-M4F, 64 MHz; nRF52840-DK, probe-rs chip `nRF52840_xxAA`) without a SoftDevice.

pub use super::probe::*;
