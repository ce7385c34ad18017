//! A SysTick counter of core clock ticks, on every Arm board but the micro:bit (the nRF51 has no SysTick).

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{SCB, SYST};
use cortex_m_rt::exception;

/// SysTick reload value: the full 24 bits, one wrap every 2^24 ticks.
const RELOAD: u32 = 0x00ff_ffff;

/// SysTick wraps so far, counted by its exception.
static WRAPS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    // A load and a store rather than `fetch_add`, which ARMv6-M lacks: this handler is the only writer.
    WRAPS.store(
        WRAPS.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
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

/// Instructions executed (QEMU boards), counted with SysTick on the core clock of `HZ` Hz.
#[cfg(any(feature = "qemu", feature = "qemu-usart"))]
pub struct SysTickInstructions<const HZ: u64> {
    ticks: SysTicks,
}

#[cfg(any(feature = "qemu", feature = "qemu-usart"))]
impl<const HZ: u64> SysTickInstructions<HZ> {
    /// Starts SysTick; `None` if the peripherals are taken.
    pub fn start() -> Option<Self> {
        let ticks = SysTicks::start()?;
        Some(SysTickInstructions { ticks })
    }

    /// Instructions since [`SysTickInstructions::start`], to a tick's resolution.
    pub fn now(&mut self) -> u64 {
        let (num, den) = super::qemu_arm::instructions_per_tick(HZ);
        self.ticks.now() * num / den
    }
}
