//! Arm boards emulated by QEMU: defmt over semihosting (the netduinoplus2: over a USART, its own
//! `exit`), and instructions counted.
//!
//! Run with `-icount shift=0`: QEMU then advances virtual time by exactly 1 ns per instruction, so a
//! timer clocked at `f` Hz ticks once per `10^9 / f` instructions (SysTick on the mps2 boards at 25 MHz:
//! 40 instructions). QEMU has no cycle timing (and DWT's cycle counter reads 0), so the cost is
//! quoted in instructions, never as time.

#[cfg(feature = "qemu")]
use defmt_semihosting as _;

#[cfg(feature = "qemu")]
pub use super::cortex_m::exit;
pub use super::cortex_m::stack_pointer;
#[cfg(not(feature = "qemu"))]
use super::exit;

/// Prints the mean cost of one forward step.
pub fn print_cost_per_token(instructions: u64) {
    defmt::println!("instructions_per_token={=u64}", instructions);
}

/// Instructions per `den` ticks of a timer at `hz` under `-icount shift=0`: `(10^9 / gcd, hz / gcd)`.
pub const fn instructions_per_tick(hz: u64) -> (u64, u64) {
    let (mut a, mut b) = (1_000_000_000, hz);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    (1_000_000_000 / a, hz / a)
}

/// Logs that a panic happened and exits with failure. It reads nothing from the `PanicInfo` (neither
/// message nor location): then fat LTO removes the panic messages' arguments, and with them `core::fmt`
/// and every panic location string, 2.6 KB of flash. (Neither microlens nor this firmware panics on
/// any input; what remains are bounds checks the compiler could not prove.)
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    defmt::error!("panicked");
    exit(false)
}

// SAFETY: cortex-m-rt requires a HardFault handler to be an `unsafe fn` (it may run on a corrupt
// stack); this one reads nothing from the frame and only logs and exits.
#[cortex_m_rt::exception]
unsafe fn HardFault(_frame: &cortex_m_rt::ExceptionFrame) -> ! {
    defmt::error!("hard fault");
    exit(false)
}
