//! The STM32F4's USARTs, polled (RM0090, 30 USART): USART1 (`0x4001_1000`, QEMU's first serial port)
//! carries serve mode's frames, USART2 (`0x4000_4400`, the second) the defmt log. Both on the reset
//! clock (HSI, 16 MHz; QEMU ignores rates), their bus clocks enabled in the RCC as on the chip.

use super::mmio::{read, write};

/// RCC's bus clock enables.
const RCC_APB1ENR: usize = 0x4002_3840;
#[cfg(feature = "serve")]
const RCC_APB2ENR: usize = 0x4002_3844;
/// APB1ENR: USART2; APB2ENR: USART1.
const USART2EN: u32 = 1 << 17;
#[cfg(feature = "serve")]
const USART1EN: u32 = 1 << 4;

/// Register offsets.
const SR: usize = 0x00;
const DR: usize = 0x04;
const BRR: usize = 0x08;
const CR1: usize = 0x0C;
/// SR: a byte received; the transmit register empty.
#[cfg(feature = "serve")]
const RXNE: u32 = 1 << 5;
const TXE: u32 = 1 << 7;
/// CR1: USART, transmitter and receiver enabled.
const UE_TE_RE: u32 = (1 << 13) | (1 << 3) | (1 << 2);
/// CR1: the interrupt on a byte received (serve mode's link, which sleeps until it pends).
#[cfg(feature = "serve")]
const RXNEIE: u32 = 1 << 5;
/// USART1's interrupt on the STM32F405 (RM0090, the vector table; QEMU `stm32f405_soc.c`).
#[cfg(feature = "serve")]
const USART1_IRQ: usize = 37;
/// BRR at 16 MHz for 115,200 baud (oversampling by 16: 8.6875 = 8 + 11/16).
const BRR_115200: u32 = (8 << 4) | 11;

/// One USART at `base`.
#[derive(Clone, Copy)]
struct Usart {
    base: usize,
}

impl Usart {
    /// Enables its clock (`enable` in the RCC register `rcc`), then it, at 115,200 baud.
    fn enable(self, rcc: usize, clock: u32) -> Self {
        write(rcc, read(rcc) | clock);
        write(self.base + BRR, BRR_115200);
        write(self.base + CR1, UE_TE_RE);
        self
    }

    /// The next byte received, asleep until it arrives (reading `DR` clears `RXNE` and with it the
    /// interrupt); `irq` is this USART's interrupt.
    #[cfg(feature = "serve")]
    fn read_byte(self, irq: usize) -> u8 {
        super::cortex_m::sleep_until(irq, || read(self.base + SR) & RXNE != 0);
        read(self.base + DR) as u8
    }

    fn write_byte(self, byte: u8) {
        while read(self.base + SR) & TXE == 0 {}
        write(self.base + DR, u32::from(byte));
    }
}

/// USART1, the link.
#[cfg(feature = "serve")]
const USART1: Usart = Usart { base: 0x4001_1000 };
/// USART2, the log.
const USART2: Usart = Usart { base: 0x4000_4400 };

/// Enables USART2 for the log (once, before the first line).
pub fn enable_log() {
    USART2.enable(RCC_APB1ENR, USART2EN);
}

/// Sends the log's `bytes` on USART2.
pub fn write_log(bytes: &[u8]) {
    for &b in bytes {
        USART2.write_byte(b);
    }
}

/// USART1, enabled: serve mode's link.
#[cfg(feature = "serve")]
pub struct Uart(());

#[cfg(feature = "serve")]
impl Uart {
    /// Enables USART1 at 115,200 baud, with its interrupt on a byte received.
    pub fn take() -> Self {
        USART1.enable(RCC_APB2ENR, USART1EN);
        write(USART1.base + CR1, UE_TE_RE | RXNEIE);
        Uart(())
    }

    /// The next byte received (asleep until one arrives).
    pub fn read_byte(&mut self) -> u8 {
        USART1.read_byte(USART1_IRQ)
    }

    /// Sends `byte` (polls until the transmit register is empty).
    pub fn write_byte(&mut self, byte: u8) {
        USART1.write_byte(byte);
    }
}
