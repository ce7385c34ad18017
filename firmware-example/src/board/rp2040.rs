//! RP2040 (dual Cortex-M0+, 133 MHz; Raspberry Pi Pico, probe-rs chip `RP2040`), on core 0 and its
//! reset clock. The boot ROM copies the first 256 bytes of flash, the second-stage bootloader, to RAM
//! and runs it; it sets up execute-in-place from the QSPI flash and jumps to the vector table after it.

pub use super::probe::*;

/// The second-stage bootloader for the Pico's W25Q080 flash (`memory/rp2040.x` places `.boot2`).
#[link_section = ".boot2"]
#[used]
static BOOT2: [u8; 256] = rp2040_boot2::BOOT_LOADER_W25Q080;
