//! Stack high-water mark by painting: fill the free stack with a pattern at boot, and later find the
//! lowest word that was overwritten. The stack grows down from `_stack_start` (the top of RAM) towards
//! `_stack_end` (the end of the statics): both from cortex-m-rt's `link.x` on Arm; on RISC-V
//! `_stack_start` is riscv-rt's and `_stack_end` the board's `memory.x`'s.

use core::ptr;

/// The paint.
const PAINT: u32 = 0x5eed_c0de;
/// Words left unpainted just below the stack pointer of [`paint`], for its own calls.
const MARGIN_WORDS: usize = 16;

extern "C" {
    static _stack_start: u32;
    static _stack_end: u32;
    /// From `memory.x`: its address is the stack reserve in bytes.
    static _stack_reserve: u8;
}

fn top() -> usize {
    (&raw const _stack_start) as usize
}

fn bottom() -> usize {
    (&raw const _stack_end) as usize
}

/// The stack reserve of `memory.x` in bytes.
pub fn reserve() -> usize {
    (&raw const _stack_reserve) as usize
}

/// Paints the free stack: every word from the end of the statics to just below the stack pointer.
#[inline(never)]
pub fn paint() {
    let sp = crate::board::stack_pointer();
    let end = sp.saturating_sub(4 * MARGIN_WORDS) & !3;
    let mut at = bottom();
    while at < end {
        // SAFETY: `at` is word-aligned and in RAM between the end of the statics and the stack pointer:
        // memory that no Rust object occupies, and that nothing else (no interrupt is enabled yet) uses.
        unsafe { ptr::write_volatile(at as *mut u32, PAINT) };
        at += 4;
    }
}

/// Bytes of stack used so far at its deepest, counting from the top of RAM.
#[inline(never)]
pub fn high_water() -> usize {
    let sp = crate::board::stack_pointer();
    let mut at = bottom();
    while at < sp {
        // SAFETY: `at` is word-aligned and below the stack pointer, in RAM above the statics: no live
        // object is there, and reading it has no side effect.
        if unsafe { ptr::read_volatile(at as *const u32) } != PAINT {
            break;
        }
        at += 4;
    }
    top() - at
}
