//! The firmware's boards: each is a cargo feature of the firmware with `src/board/<name>.rs` and
//! `memory/<name>.x` there, and one row here saying what it is built for and how it runs.

use crate::toolchain::{Package, QEMU_ARM, QEMU_RISCV};

/// A board (its firmware feature, and for emulated boards its QEMU machine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Board {
    /// QEMU `microbit`: nRF51822, Cortex-M0, 16 KiB of RAM (context capped to fit).
    Microbit,
    /// QEMU `mps2-an385`: Cortex-M3.
    Mps2An385,
    /// QEMU `mps2-an386`: Cortex-M4F (the default).
    #[value(alias = "qemu")]
    Mps2An386,
    /// QEMU `mps2-an500`: Cortex-M7.
    Mps2An500,
    /// QEMU `mps2-an505`: Cortex-M33.
    Mps2An505,
    /// QEMU `mps3-an547`: Cortex-M55 with Helium.
    Mps3An547,
    /// QEMU `netduinoplus2`: a real STM32F405 (Cortex-M4F), its USARTs, no semihosting.
    Netduinoplus2,
    /// QEMU `virt` with an RV32IMAC hart.
    Riscv32Virt,
    /// nRF52840 (nRF52840-DK): built and measured only.
    Nrf52840,
    /// RP2040 (Raspberry Pi Pico): built and measured only.
    Rp2040,
    /// RP2350 (Raspberry Pi Pico 2): built and measured only.
    Rp2350,
    /// STM32F446RE (Nucleo-F446RE): built and measured only.
    Stm32f446re,
}

/// How a board's firmware runs.
#[derive(Clone, Copy, Debug)]
pub enum Runs {
    /// On QEMU: `<system> -machine <machine> [-cpu <cpu>] <args>`.
    Qemu {
        /// The QEMU binary and its Debian package.
        system: Package,
        /// `-machine`.
        machine: &'static str,
        /// `-cpu`, if not the machine's default.
        cpu: Option<&'static str>,
        /// Further arguments.
        args: &'static [&'static str],
        /// Where the firmware's defmt log leaves.
        log: Log,
    },
    /// On the board, through a debug probe: `probe-rs run --chip <chip>`.
    Probe {
        /// probe-rs's chip name.
        chip: &'static str,
    },
}

/// Where an emulated board's defmt log leaves, and how its firmware ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Log {
    /// Semihosting, to QEMU's stdout; the firmware exits through semihosting with its status.
    Semihosting,
    /// The second serial port, to QEMU's stdout (the first is serve mode's link); the firmware prints
    /// `firmware_exit=true|false` and resets the chip, which ends QEMU under `-no-reboot`.
    SecondSerial,
}

/// What a board is built for and how it runs.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// The core, for reports.
    pub core: &'static str,
    /// The Rust target.
    pub target: &'static str,
    /// Rust flags beyond the target's in the firmware's `.cargo/config.toml`.
    pub rustflags: &'static [&'static str],
    /// How it runs.
    pub runs: Runs,
    /// RAM the budget allows beyond the KV cache and the workspace: 2 KiB (the budget, set on the
    /// Cortex-M4F) plus 128 B for the LayerNorm model's deeper stack in the float builds (the f16 build's
    /// high-water mark on the M4F is 1,672 B), 2.25 KiB + 128 B on ARMv6-M, whose code keeps more on the
    /// stack (8 low registers, more spills); the integer builds may have a stricter
    /// [`Spec::integer_budget`].
    pub ram_allowance: u64,
    /// The stricter budget of the integer builds (every matrix int8 or int4) on the board the issue's
    /// budget was set on, where their shallower stack meets it; `None` elsewhere.
    pub integer_budget: Option<IntegerBudget>,
    /// Stack reserve of the integer-only arithmetic's builds (`--arith integer`) with int8 and with
    /// int4 matrices, with [`Spec::ram_allowance`]: their high-water mark plus at least the required
    /// margin, where memory.x's (set for the float builds' deeper stacks) would not leave the
    /// allowance for the rest; `None`: memory.x's.
    pub arith_integer_reserve: Option<[u32; 2]>,
}

/// Stack reserve and RAM allowance of the integer builds where [`Spec::integer_budget`] sets them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntegerBudget {
    /// Stack reserve instead of memory.x's: all the allowance leaves beside the statics, at least the
    /// required margin above the shipped model's high-water marks (1,576 B W8A8, 1,600 B W8A16,
    /// 1,596 B W4A8 on the M4F).
    pub stack_reserve: u32,
    /// RAM beyond the KV cache and the workspace: the 2 KiB.
    pub ram_allowance: u64,
}

impl Board {
    /// Every board, emulated ones first.
    pub const ALL: [Board; 12] = [
        Board::Microbit,
        Board::Mps2An385,
        Board::Mps2An386,
        Board::Mps2An500,
        Board::Mps2An505,
        Board::Mps3An547,
        Board::Netduinoplus2,
        Board::Riscv32Virt,
        Board::Nrf52840,
        Board::Rp2040,
        Board::Rp2350,
        Board::Stm32f446re,
    ];

    /// Its name: the firmware feature, `memory/<name>.x`, and the QEMU machine of an emulated board.
    pub fn name(self) -> &'static str {
        match self {
            Board::Microbit => "microbit",
            Board::Mps2An385 => "mps2-an385",
            Board::Mps2An386 => "mps2-an386",
            Board::Mps2An500 => "mps2-an500",
            Board::Mps2An505 => "mps2-an505",
            Board::Mps3An547 => "mps3-an547",
            Board::Netduinoplus2 => "netduinoplus2",
            Board::Riscv32Virt => "riscv32-virt",
            Board::Nrf52840 => "nrf52840",
            Board::Rp2040 => "rp2040",
            Board::Rp2350 => "rp2350",
            Board::Stm32f446re => "stm32f446re",
        }
    }

    /// What it is built for and how it runs.
    pub fn spec(self) -> Spec {
        let arm = |machine, cpu| Runs::Qemu {
            system: QEMU_ARM,
            machine,
            cpu: Some(cpu),
            args: &[],
            log: Log::Semihosting,
        };
        let (core, target, rustflags, runs): (_, _, &'static [&'static str], _) = match self {
            Board::Microbit => (
                "Cortex-M0",
                "thumbv6m-none-eabi",
                &[],
                Runs::Qemu {
                    system: QEMU_ARM,
                    machine: "microbit",
                    cpu: None,
                    args: &[],
                    log: Log::Semihosting,
                },
            ),
            Board::Mps2An385 => (
                "Cortex-M3",
                "thumbv7m-none-eabi",
                &[],
                arm("mps2-an385", "cortex-m3"),
            ),
            Board::Mps2An386 => (
                "Cortex-M4F",
                "thumbv7em-none-eabihf",
                &[],
                arm("mps2-an386", "cortex-m4"),
            ),
            Board::Mps2An500 => (
                "Cortex-M7",
                "thumbv7em-none-eabihf",
                &["-C", "target-cpu=cortex-m7"],
                arm("mps2-an500", "cortex-m7"),
            ),
            Board::Mps2An505 => (
                "Cortex-M33",
                "thumbv8m.main-none-eabihf",
                &[],
                arm("mps2-an505", "cortex-m33"),
            ),
            // Rust has no ARMv8.1-M target: ARMv8-M Mainline for the Cortex-M55, which enables its
            // ARMv8.1-M extensions (Helium, low-overhead loops).
            Board::Mps3An547 => (
                "Cortex-M55",
                "thumbv8m.main-none-eabihf",
                &["-C", "target-cpu=cortex-m55"],
                arm("mps3-an547", "cortex-m55"),
            ),
            Board::Netduinoplus2 => (
                "Cortex-M4F",
                "thumbv7em-none-eabihf",
                &[],
                Runs::Qemu {
                    system: QEMU_ARM,
                    machine: "netduinoplus2",
                    cpu: None,
                    args: &[],
                    log: Log::SecondSerial,
                },
            ),
            Board::Riscv32Virt => (
                "RV32IMAC",
                "riscv32imac-unknown-none-elf",
                &[],
                Runs::Qemu {
                    system: QEMU_RISCV,
                    machine: "virt",
                    cpu: None,
                    args: &["-bios", "none"],
                    log: Log::Semihosting,
                },
            ),
            Board::Nrf52840 => (
                "Cortex-M4F",
                "thumbv7em-none-eabihf",
                &[],
                Runs::Probe {
                    chip: "nRF52840_xxAA",
                },
            ),
            Board::Rp2040 => (
                "Cortex-M0+",
                "thumbv6m-none-eabi",
                &[],
                Runs::Probe { chip: "RP2040" },
            ),
            Board::Rp2350 => (
                "Cortex-M33",
                "thumbv8m.main-none-eabihf",
                &[],
                Runs::Probe { chip: "RP235x" },
            ),
            Board::Stm32f446re => (
                "Cortex-M4F",
                "thumbv7em-none-eabihf",
                &[],
                Runs::Probe {
                    chip: "STM32F446RETx",
                },
            ),
        };
        let ram_allowance = match target {
            "thumbv6m-none-eabi" => 2048 + 256 + 128,
            _ => 2048 + 128,
        };
        let integer_budget = (self == Board::Mps2An386).then_some(IntegerBudget {
            stack_reserve: 1696,
            ram_allowance: 2048,
        });
        // The shipped model's high-water marks in the integer-only arithmetic, int8 and int4: 1,988
        // and 2,072 B on the M0, 1,704 and 1,740 B on the M3, 1,596 and 1,640 B on the RV32IMAC,
        // 1,808 and 1,756 B on the M4F, 1,848 and 1,744 B on the M55. The M0's int8 reserve keeps
        // its context at 38 positions (int4's, 37).
        let arith_integer_reserve = match self {
            Board::Microbit => Some([2112, 2240]),
            Board::Mps2An385 => Some([1856; 2]),
            Board::Riscv32Virt => Some([1792; 2]),
            Board::Mps2An386 | Board::Mps3An547 => Some([1984; 2]),
            _ => None,
        };
        Spec {
            core,
            target,
            rustflags,
            runs,
            ram_allowance,
            integer_budget,
            arith_integer_reserve,
        }
    }

    /// Whether it runs on QEMU.
    pub fn emulated(self) -> bool {
        matches!(self.spec().runs, Runs::Qemu { .. })
    }
}
