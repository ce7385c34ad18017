//! The board, chosen by cargo feature (exactly one): its module here, `src/board/<board>.rs`, and its
//! memory map, `memory/<board>.x`.
//!
//! Every board provides `exit(success) -> !`, a `Counter` with `start()` and `now()` (monotonic: the
//! instructions executed under QEMU, the core's cycles on a real board), `print_cost_per_token(n)` and
//! `stack_pointer()`; a board with serve mode (feature `serve`) also a `Uart` with `take()`,
//! `read_byte()` and `write_byte(b)`. Boards of one family share their code: [`cortex_m`] (every Arm board), [`systick`]
//! (every Arm board but the micro:bit), [`qemu_arm`] (Arm boards emulated by QEMU), [`probe`] (real
//! boards on a debug probe); the UART drivers: `cmsdk_uart` (mps2), `nrf51_uart` (micro:bit),
//! `stm32_usart` (netduinoplus2, whose log is a USART too).

#[cfg(not(any(
    feature = "microbit",
    feature = "mps2-an385",
    feature = "mps2-an386",
    feature = "mps2-an500",
    feature = "mps2-an505",
    feature = "mps3-an547",
    feature = "netduinoplus2",
    feature = "riscv32-virt",
    feature = "nrf52840",
    feature = "rp2040",
    feature = "rp2350",
    feature = "stm32f446re",
)))]
compile_error!("enable a board feature, e.g. `--features mps2-an386` (see Cargo.toml)");

#[cfg(all(
    feature = "serve",
    any(feature = "mps2-an385", feature = "mps2-an386", feature = "mps2-an500")
))]
mod cmsdk_uart;
#[cfg(all(feature = "serve", feature = "microbit"))]
mod nrf51_uart;
#[cfg(feature = "netduinoplus2")]
mod stm32_usart;
#[cfg(all(
    feature = "serve",
    not(any(
        feature = "mps2-an385",
        feature = "mps2-an386",
        feature = "mps2-an500",
        feature = "microbit",
        feature = "netduinoplus2"
    ))
))]
compile_error!(
    "serve mode needs a board with a UART driver: mps2-an385, mps2-an386, mps2-an500, microbit or netduinoplus2"
);
#[cfg(target_arch = "arm")]
mod cortex_m;
#[cfg(any(feature = "microbit", feature = "netduinoplus2", feature = "serve"))]
mod mmio;
#[cfg(feature = "probe")]
mod probe;
#[cfg(all(target_arch = "arm", any(feature = "qemu", feature = "qemu-usart")))]
mod qemu_arm;
#[cfg(all(target_arch = "arm", not(feature = "microbit")))]
mod systick;

#[cfg_attr(feature = "microbit", path = "microbit.rs")]
#[cfg_attr(feature = "mps2-an385", path = "mps2_an385.rs")]
#[cfg_attr(feature = "mps2-an386", path = "mps2_an386.rs")]
#[cfg_attr(feature = "mps2-an500", path = "mps2_an500.rs")]
#[cfg_attr(feature = "mps2-an505", path = "mps2_an505.rs")]
#[cfg_attr(feature = "mps3-an547", path = "mps3_an547.rs")]
#[cfg_attr(feature = "netduinoplus2", path = "netduinoplus2.rs")]
#[cfg_attr(feature = "riscv32-virt", path = "riscv32_virt.rs")]
#[cfg_attr(feature = "nrf52840", path = "nrf52840.rs")]
#[cfg_attr(feature = "rp2040", path = "rp2040.rs")]
#[cfg_attr(feature = "rp2350", path = "rp2350.rs")]
#[cfg_attr(feature = "stm32f446re", path = "stm32f446re.rs")]
mod selected;

pub use selected::*;
