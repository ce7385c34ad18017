//! QEMU's mps2-an386 (Cortex-M4F): defmt over semihosting, and SysTick as an instruction counter.
//!
//! Run with `-icount shift=0`: QEMU then advances virtual time by exactly 1 ns per instruction, and
//! SysTick, clocked at 25 MHz on mps2 boards, ticks once per 40 instructions. QEMU has no cycle timing
//! (and DWT's cycle counter reads 0), so the cost is quoted in instructions, never as time.

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{SCB, SYST};
use cortex_m_rt::exception;
use defmt_semihosting as _;

/// SysTick reload value: the full 24 bits, one wrap every 2^24 ticks.
const RELOAD: u32 = 0x00ff_ffff;
/// Instructions per SysTick tick under `-icount shift=0` (1 GHz virtual clock / 25 MHz SysTick).
const INSTRUCTIONS_PER_TICK: u64 = 40;

/// SysTick wraps so far, counted by its exception.
static WRAPS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    WRAPS.fetch_add(1, Ordering::Relaxed);
}

/// Counts instructions executed (in units of 40) with SysTick.
pub struct Counter {
    _syst: SYST,
}

impl Counter {
    /// Starts SysTick on the core clock, with its wrap interrupt.
    pub fn start(cp: cortex_m::Peripherals) -> Self {
        let mut syst = cp.SYST;
        syst.set_clock_source(SystClkSource::Core);
        syst.set_reload(RELOAD);
        syst.clear_current();
        syst.enable_interrupt();
        syst.enable_counter();
        Counter { _syst: syst }
    }

    /// Instructions since [`Counter::start`], to a multiple of 40.
    pub fn now(&mut self) -> u64 {
        loop {
            let wraps = WRAPS.load(Ordering::Acquire);
            let current = SYST::get_current();
            // A wrap whose exception is still pending: the counter has just reloaded if it reads high.
            let pending = SCB::is_pendst_pending() && current > RELOAD / 2;
            if WRAPS.load(Ordering::Acquire) == wraps {
                let wraps = u64::from(wraps) + u64::from(pending);
                let ticks = wraps * (u64::from(RELOAD) + 1) + u64::from(RELOAD - current);
                return ticks * INSTRUCTIONS_PER_TICK;
            }
        }
    }
}

/// Prints the mean cost of one forward step.
pub fn print_cost_per_token(instructions: u64) {
    defmt::println!("instructions_per_token={=u64}", instructions);
}

/// Logs that a panic happened and exits with failure. It reads nothing from the `PanicInfo` (neither
/// message nor location): then fat LTO removes the panic messages' arguments, and with them `core::fmt`
/// and every panic location string, 2.6 KB of flash. (Neither microlens nor this firmware panics on
/// any input; what remains are bounds checks the compiler could not prove.)
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    defmt::error!("panicked");
    super::exit(false)
}

// SAFETY: cortex-m-rt requires a HardFault handler to be an `unsafe fn` (it may run on a corrupt
// stack); this one reads nothing from the frame and only logs and exits.
#[exception]
unsafe fn HardFault(_frame: &cortex_m_rt::ExceptionFrame) -> ! {
    defmt::error!("hard fault");
    super::exit(false)
}
