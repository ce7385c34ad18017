//! The Arm CMSDK APB UART of the mps2 boards (UART0 at `0x4000_4000`, QEMU's first serial port), polled,
//! asleep until its receive interrupt pends: the serve mode's link (Arm Cortex-M System Design Kit
//! Technical Reference Manual, APB UART).

use super::mmio::{read, write};

/// UART0's registers.
const BASE: usize = 0x4000_4000;
const DATA: usize = BASE;
const STATE: usize = BASE + 0x04;
const CTRL: usize = BASE + 0x08;
const INTCLEAR: usize = BASE + 0x0C;
const BAUDDIV: usize = BASE + 0x10;
/// STATE: the transmit buffer is full; the receive buffer holds a byte.
const TX_FULL: u32 = 1 << 0;
const RX_FULL: u32 = 1 << 1;
/// CTRL: transmitter and receiver enabled, the receive interrupt enabled.
const TX_RX_ENABLE: u32 = 0b11 | RX_INTERRUPT;
/// CTRL: the receive interrupt enabled; INTCLEAR: the receive interrupt cleared.
const RX_INTERRUPT: u32 = 1 << 3;
const RX_INTERRUPT_CLEAR: u32 = 1 << 1;
/// UART0's receive interrupt on the mps2 boards (QEMU `mps2.c`; the transmit one is 1).
const RX_IRQ: usize = 0;
/// 25 MHz / 115,200 baud.
const DIVIDER: u32 = 217;

/// UART0, enabled.
pub struct Uart(());

impl Uart {
    /// Enables UART0 at 115,200 baud (QEMU ignores the rate).
    pub fn take() -> Self {
        write(BAUDDIV, DIVIDER);
        write(CTRL, TX_RX_ENABLE);
        Uart(())
    }

    /// The next byte received (asleep until one arrives); its interrupt cleared after the read, so
    /// that a byte arriving meanwhile is seen by the next call's check before it sleeps.
    pub fn read_byte(&mut self) -> u8 {
        super::cortex_m::sleep_until(RX_IRQ, || read(STATE) & RX_FULL != 0);
        let byte = read(DATA) as u8;
        write(INTCLEAR, RX_INTERRUPT_CLEAR);
        byte
    }

    /// Sends `byte` (polls until the transmit buffer has room).
    pub fn write_byte(&mut self, byte: u8) {
        while read(STATE) & TX_FULL != 0 {}
        write(DATA, u32::from(byte));
    }
}
