//! What every Arm board shares: the device part of the vector table, the semihosting exit, the stack
//! pointer and (serve mode) sleeping until a peripheral's interrupt pends.

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

/// The NVIC's interrupt set-enable, clear-enable and clear-pending registers (a word per 32
/// interrupts).
#[cfg(feature = "serve")]
const NVIC_ISER: usize = 0xE000_E100;
#[cfg(feature = "serve")]
const NVIC_ICER: usize = 0xE000_E180;
#[cfg(feature = "serve")]
const NVIC_ICPR: usize = 0xE000_E280;

/// Waits until `ready()`, asleep (`WFI`) rather than spinning: a polled driver's wait for its
/// peripheral, whose interrupt `irq` the driver has enabled at the peripheral. The interrupt is
/// enabled in the NVIC only while the core sleeps, with interrupts masked, so that its pending wakes
/// the core without a handler (the vector table has none); then it is disabled and its pending bit
/// cleared. An exception (SysTick's wrap) wakes the core too, and is taken when the mask lifts. On
/// QEMU an idle board then costs the host no CPU.
#[cfg(feature = "serve")]
pub fn sleep_until(irq: usize, ready: impl Fn() -> bool) {
    use super::mmio::write;
    let (word, bit) = (4 * (irq / 32), 1 << (irq % 32));
    while !ready() {
        cortex_m::interrupt::free(|_| {
            write(NVIC_ISER + word, bit);
            if !ready() {
                cortex_m::asm::wfi();
            }
            write(NVIC_ICER + word, bit);
            write(NVIC_ICPR + word, bit);
        });
    }
}
