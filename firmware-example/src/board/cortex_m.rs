//! What every Arm board shares: the device part of the vector table, the semihosting exit and the
//! stack pointer.

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
#[cfg_attr(feature = "qemu-usart", allow(dead_code))]
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

/// The stack pointer.
pub fn stack_pointer() -> usize {
    cortex_m::register::msp::read() as usize
}
