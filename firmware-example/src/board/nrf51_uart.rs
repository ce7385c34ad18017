//! The nRF51's UART (at `0x4000_2000`, QEMU `microbit`'s first serial port), polled, asleep until its
//! receive interrupt pends: the serve mode's link on the micro:bit (nRF51 Series Reference Manual, 29 UART), 115,200 baud on the micro:bit's
//! USB-serial pins (TXD P0.24, RXD P0.25).

use super::mmio::{read, write};

/// The UART's registers.
const BASE: usize = 0x4000_2000;
const TASKS_STARTRX: usize = BASE;
const TASKS_STARTTX: usize = BASE + 0x008;
const EVENTS_RXDRDY: usize = BASE + 0x108;
const EVENTS_TXDRDY: usize = BASE + 0x11C;
const INTENSET: usize = BASE + 0x304;
const ENABLE: usize = BASE + 0x500;
const PSELTXD: usize = BASE + 0x50C;
const PSELRXD: usize = BASE + 0x514;
const RXD: usize = BASE + 0x518;
const TXD: usize = BASE + 0x51C;
const BAUDRATE: usize = BASE + 0x524;
/// INTENSET: the interrupt on `EVENTS_RXDRDY`.
const RXDRDY_INTERRUPT: u32 = 1 << 2;
/// The UART's interrupt (its peripheral ID, from its base address).
const UART_IRQ: usize = 2;
/// ENABLE: the UART on.
const ENABLED: u32 = 4;
/// BAUDRATE: 115,200 baud.
const BAUD_115200: u32 = 0x01D7_E000;
/// The micro:bit's interface-chip pins.
const PIN_TXD: u32 = 24;
const PIN_RXD: u32 = 25;

/// The UART, enabled, receiving and transmitting.
pub struct Uart(());

impl Uart {
    /// Routes the UART to the micro:bit's USB-serial pins at 115,200 baud (QEMU ignores pins and rate)
    /// and starts both directions.
    pub fn take() -> Self {
        write(PSELTXD, PIN_TXD);
        write(PSELRXD, PIN_RXD);
        write(BAUDRATE, BAUD_115200);
        write(ENABLE, ENABLED);
        // After ENABLE: the disabled UART ignores its other registers (as QEMU's does).
        write(INTENSET, RXDRDY_INTERRUPT);
        write(TASKS_STARTRX, 1);
        write(TASKS_STARTTX, 1);
        Uart(())
    }

    /// The next byte received (asleep until one arrives): the event (and with it the interrupt) is
    /// cleared before RXD is read, so a byte that arrives meanwhile raises it again.
    pub fn read_byte(&mut self) -> u8 {
        super::cortex_m::sleep_until(UART_IRQ, || read(EVENTS_RXDRDY) != 0);
        write(EVENTS_RXDRDY, 0);
        read(RXD) as u8
    }

    /// Sends `byte` and waits until it has left.
    pub fn write_byte(&mut self, byte: u8) {
        write(TXD, u32::from(byte));
        while read(EVENTS_TXDRDY) == 0 {}
        write(EVENTS_TXDRDY, 0);
    }
}
