//! STM32F446RE (Cortex-M4F, 180 MHz; Nucleo-F446RE, probe-rs chip `STM32F446RETx`), on its reset clock.

pub use super::probe::*;
