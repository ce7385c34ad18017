//! Word access to peripheral registers, for the board modules' drivers (UARTs, the micro:bit's timer).

use core::ptr;

/// The register at `addr`.
pub fn read(addr: usize) -> u32 {
    // SAFETY: every caller (a driver in `board/`) passes one of its peripheral's word-aligned register
    // addresses, memory-mapped I/O that no Rust object aliases; each peripheral has one driver.
    unsafe { ptr::read_volatile(addr as *const u32) }
}

/// Writes `value` to the register at `addr`.
pub fn write(addr: usize, value: u32) {
    // SAFETY: as in `read`.
    unsafe { ptr::write_volatile(addr as *mut u32, value) }
}
