//! Real boards on a debug probe: defmt over RTT, panic-probe, and the core's cycles counted with
//! SysTick on the core clock (every Cortex-M has it, the M0+ included, which has no DWT cycle counter).

use defmt_rtt as _;
use panic_probe as _;

pub use super::cortex_m::{exit, stack_pointer};
pub use super::systick::SysTicks as Counter;

/// Prints the mean cost of one forward step.
pub fn print_cost_per_token(cycles: u64) {
    defmt::println!("cycles_per_token={=u64}", cycles);
}
