//! The board, chosen by cargo feature: its defmt transport, panic handling, exit and cost counter.
//!
//! Every board provides `exit(success) -> !`, a [`Counter`] with `start(peripherals)` and `now()`
//! (monotonic, in the board's unit) and `print_cost_per_token(n)`.

#[cfg(all(feature = "qemu", feature = "nrf52840"))]
compile_error!("enable exactly one board feature: `qemu` or `nrf52840`");
#[cfg(not(any(feature = "qemu", feature = "nrf52840")))]
compile_error!("enable a board feature: `--features qemu` or `--features nrf52840`");

#[cfg(feature = "nrf52840")]
mod nrf52840;
#[cfg(feature = "qemu")]
mod qemu;

#[cfg(feature = "nrf52840")]
pub use nrf52840::{print_cost_per_token, Counter};
#[cfg(feature = "qemu")]
pub use qemu::{print_cost_per_token, Counter};

use cortex_m_semihosting::debug;

/// The device-specific part of the vector table, one entry long: the firmware enables no interrupt
/// (SysTick is a core exception, in cortex-m-rt's part of the table), and cortex-m-rt's `link.x`
/// wants at least one entry. Without its `device` feature cortex-m-rt puts 240 entries there, 960 B
/// of flash. A firmware that enables a peripheral's interrupt needs its board's PAC instead, which
/// provides the whole table (and `device.x`).
#[link_section = ".vector_table.interrupts"]
#[no_mangle]
static __INTERRUPTS: [unsafe extern "C" fn(); 1] = [DefaultHandler];

extern "C" {
    /// cortex-m-rt's handler for interrupts without one of their own.
    fn DefaultHandler();
}

/// Ends the program through semihosting (QEMU exits with this status; `probe-rs run` too).
pub fn exit(success: bool) -> ! {
    debug::exit(if success {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    // Only reached without a semihosting host.
    loop {
        cortex_m::asm::wfi();
    }
}
