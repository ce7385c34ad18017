//! The Arm CMSDK APB UART of the mps2 boards (UART0 at `0x4000_4000`, QEMU's first serial port), polled:
//! the serve mode's link (Arm Cortex-M System Design Kit Technical Reference Manual, APB UART).

use super::mmio::{read, write};

/// UART0's registers.
const BASE: usize = 0x4000_4000;
const DATA: usize = BASE;
const STATE: usize = BASE + 0x04;
const CTRL: usize = BASE + 0x08;
const BAUDDIV: usize = BASE + 0x10;
/// STATE: the transmit buffer is full; the receive buffer holds a byte.
const TX_FULL: u32 = 1 << 0;
const RX_FULL: u32 = 1 << 1;
/// CTRL: transmitter and receiver enabled.
const TX_RX_ENABLE: u32 = 0b11;
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

    /// The next byte received (polls until one arrives).
    pub fn read_byte(&mut self) -> u8 {
        while read(STATE) & RX_FULL == 0 {}
        read(DATA) as u8
    }

    /// Sends `byte` (polls until the transmit buffer has room).
    pub fn write_byte(&mut self, byte: u8) {
        while read(STATE) & TX_FULL != 0 {}
        write(DATA, u32::from(byte));
    }
}
