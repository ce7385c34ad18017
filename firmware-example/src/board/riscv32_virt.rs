//! QEMU's RISC-V `virt` machine with an RV32IMAC hart: defmt over semihosting, instructions counted by
//! the `minstret` CSR (under `-icount` QEMU counts retired instructions there exactly).

use defmt_semihosting as _;

/// Ends the program through semihosting (QEMU exits with this status).
pub fn exit(success: bool) -> ! {
    semihosting::process::exit(if success { 0 } else { 1 })
}

/// The stack pointer.
pub fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: copies the stack pointer into a register; no memory, stack or flags are touched.
    unsafe { core::arch::asm!("mv {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}

/// Prints the mean cost of one forward step.
pub fn print_cost_per_token(instructions: u64) {
    defmt::println!("instructions_per_token={=u64}", instructions);
}

/// Instructions retired, from `minstret`/`minstreth`.
pub struct Counter;

impl Counter {
    /// The counter (`minstret` runs from reset).
    pub fn start() -> Option<Self> {
        Some(Counter)
    }

    /// Instructions retired since reset.
    pub fn now(&mut self) -> u64 {
        riscv::register::minstret::read64()
    }
}

/// Logs that a panic happened and exits with failure, reading nothing from the `PanicInfo` (as on the
/// Arm boards: no `core::fmt`).
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    defmt::error!("panicked");
    exit(false)
}
