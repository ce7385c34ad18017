//! QEMU's `microbit`: an nRF51822, Cortex-M0 (ARMv6-M: no FPU, no DSP), 256 KiB of flash, 16 KiB of
//! RAM. The full context's KV cache does not fit: `build.rs` caps the session's context to what the RAM
//! holds.
//!
//! The nRF51 has no SysTick (QEMU models none either), so instructions are counted with TIMER0 in
//! 32-bit timer mode at its 16 MHz base clock: under `-icount shift=0` one tick per 62.5 instructions.

use super::mmio::{read, write};

#[cfg(feature = "serve")]
pub use super::nrf51_uart::Uart;
pub use super::qemu_arm::{exit, instructions_per_tick, print_cost_per_token, stack_pointer};

/// TIMER0's registers (nRF51 Series Reference Manual, TIMER).
const TIMER0: usize = 0x4000_8000;
const TASKS_START: usize = TIMER0;
const TASKS_CAPTURE0: usize = TIMER0 + 0x040;
const MODE: usize = TIMER0 + 0x504;
const BITMODE: usize = TIMER0 + 0x508;
const PRESCALER: usize = TIMER0 + 0x510;
const CC0: usize = TIMER0 + 0x540;
/// TIMER0's clock with prescaler 0.
const TIMER_HZ: u64 = 16_000_000;

/// Instructions executed, from TIMER0's 32-bit count (extended to 64 bits: `now` runs more often than
/// once per 2^32 ticks, 268 s of virtual time).
pub struct Counter {
    last: u32,
    ticks: u64,
}

impl Counter {
    /// Starts TIMER0 free-running: timer mode, 32 bits, prescaler 0.
    pub fn start() -> Option<Self> {
        write(MODE, 0);
        write(BITMODE, 3);
        write(PRESCALER, 0);
        write(TASKS_START, 1);
        let mut counter = Counter { last: 0, ticks: 0 };
        counter.last = Self::capture();
        Some(counter)
    }

    /// The timer's count, captured into CC[0].
    fn capture() -> u32 {
        write(TASKS_CAPTURE0, 1);
        read(CC0)
    }

    /// Instructions since [`Counter::start`], to a tick's resolution.
    pub fn now(&mut self) -> u64 {
        let now = Self::capture();
        self.ticks += u64::from(now.wrapping_sub(self.last));
        self.last = now;
        let (num, den) = instructions_per_tick(TIMER_HZ);
        self.ticks * num / den
    }
}
