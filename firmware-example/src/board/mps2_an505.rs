//! QEMU's `mps2-an505`: Cortex-M33 (ARMv8-M Mainline, DSP, FPU); SysTick on the 20 MHz system clock.

pub use super::qemu_arm::*;
use super::systick::SysTickInstructions;

/// Instructions executed, from SysTick.
pub type Counter = SysTickInstructions<20_000_000>;
