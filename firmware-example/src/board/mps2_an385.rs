//! QEMU's `mps2-an385`: Cortex-M3 (ARMv7-M: no FPU, no DSP); SysTick on the 25 MHz system clock.

pub use super::qemu_arm::*;
use super::systick::SysTickInstructions;

/// Instructions executed, from SysTick.
pub type Counter = SysTickInstructions<25_000_000>;

#[cfg(feature = "serve")]
pub use super::cmsdk_uart::Uart;
