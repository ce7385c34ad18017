//! QEMU's `mps3-an547`: Cortex-M55 (ARMv8.1-M, Helium MVE, DSP, FPU); SysTick on the 32 MHz system clock.

pub use super::qemu_arm::*;
use super::systick::SysTickInstructions;

/// Instructions executed, from SysTick.
pub type Counter = SysTickInstructions<32_000_000>;
