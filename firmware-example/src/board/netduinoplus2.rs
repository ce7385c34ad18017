//! QEMU's `netduinoplus2`: a real STM32F405RG (Cortex-M4F, DSP, FPU), 1 MiB of flash at `0x0800_0000`,
//! 128 KiB of SRAM at `0x2000_0000`, on the chip's own memory map and peripherals, without semihosting:
//! the defmt log leaves on USART2, serve mode's frames on USART1, and the program ends by a system reset
//! (QEMU, started with `-no-reboot`, exits then) after a `firmware_exit=` line saying how it ended.
//! SysTick on the 168 MHz system clock QEMU gives the board.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

pub use super::qemu_arm::*;
use super::stm32_usart::{enable_log, write_log};
use super::systick::SysTickInstructions;

#[cfg(feature = "serve")]
pub use super::stm32_usart::Uart;

/// Instructions executed, from SysTick.
pub type Counter = SysTickInstructions<168_000_000>;

/// Says how the program ended, then resets the chip (QEMU exits under `-no-reboot`).
pub fn exit(success: bool) -> ! {
    defmt::println!("firmware_exit={=bool}", success);
    cortex_m::peripheral::SCB::sys_reset()
}

/// defmt's encoder, used only between [`defmt::Logger::acquire`] and `release`.
struct Encoder(UnsafeCell<defmt::Encoder>);

// SAFETY: the encoder is touched only inside the logger's critical section (interrupts off, one core).
unsafe impl Sync for Encoder {}

static ENCODER: Encoder = Encoder(UnsafeCell::new(defmt::Encoder::new()));
/// Whether USART2 is enabled; whether interrupts were on when the frame being written began.
static LOG_ENABLED: AtomicBool = AtomicBool::new(false);
static INTERRUPTS_WERE_ON: AtomicBool = AtomicBool::new(false);

/// defmt frames on USART2, each written with interrupts off.
#[defmt::global_logger]
struct UsartLogger;

// SAFETY: `acquire` disables interrupts before the encoder is touched and `release` restores them after:
// on this single core, one frame is written at a time.
unsafe impl defmt::Logger for UsartLogger {
    fn acquire() {
        let primask = cortex_m::register::primask::read();
        cortex_m::interrupt::disable();
        INTERRUPTS_WERE_ON.store(primask.is_active(), Ordering::Relaxed);
        if !LOG_ENABLED.swap(true, Ordering::Relaxed) {
            enable_log();
        }
        // SAFETY: interrupts are off: nothing else holds the encoder.
        unsafe { (*ENCODER.0.get()).start_frame(write_log) }
    }

    unsafe fn flush() {}

    unsafe fn release() {
        // SAFETY: called after `acquire`, interrupts still off.
        unsafe { (*ENCODER.0.get()).end_frame(write_log) };
        if INTERRUPTS_WERE_ON.load(Ordering::Relaxed) {
            // SAFETY: interrupts were on when `acquire` turned them off.
            unsafe { cortex_m::interrupt::enable() };
        }
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: between `acquire` and `release`, interrupts off.
        unsafe { (*ENCODER.0.get()).write(bytes, write_log) }
    }
}
