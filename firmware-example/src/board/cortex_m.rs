//! What every Arm board shares: the device part of the vector table, the semihosting exit, the stack
//! pointer and a SysTick counter of core clock ticks.

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{SCB, SYST};
use cortex_m_rt::exception;
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

/// The stack pointer.
pub fn stack_pointer() -> usize {
    cortex_m::register::msp::read() as usize
}

/// SysTick reload value: the full 24 bits, one wrap every 2^24 ticks.
const RELOAD: u32 = 0x00ff_ffff;

/// SysTick wraps so far, counted by its exception.
static WRAPS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    // A load and a store rather than `fetch_add`, which ARMv6-M lacks: this handler is the only writer.
    WRAPS.store(WRAPS.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

/// Counts SysTick ticks on the core clock (one per cycle on a real core), extended to 64 bits by
/// counting its wraps. SysTick exists on every Cortex-M but the nRF51's (the micro:bit has its own
/// counter).
pub struct SysTicks {
    _syst: SYST,
}

impl SysTicks {
    /// Starts SysTick on the core clock, with its wrap interrupt; `None` if the peripherals are taken.
    pub fn start() -> Option<Self> {
        let mut syst = cortex_m::Peripherals::take()?.SYST;
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(RELOAD);
        syst.clear_current();
        syst.enable_interrupt();
        syst.enable_counter();
        Some(SysTicks { _syst: syst })
    }

    /// Ticks since [`SysTicks::start`].
    pub fn now(&mut self) -> u64 {
        loop {
            let wraps = WRAPS.load(Ordering::Acquire);
            let current = SYST::get_current();
            // A wrap whose exception is still pending: the counter has just reloaded if it reads high.
            let pending = SCB::is_pendst_pending() && current > RELOAD / 2;
            if WRAPS.load(Ordering::Acquire) == wraps {
                let wraps = u64::from(wraps) + u64::from(pending);
                return wraps * (u64::from(RELOAD) + 1) + u64::from(RELOAD - current);
            }
        }
    }
}
