//! RP2350 (dual Cortex-M33, 150 MHz; Raspberry Pi Pico 2, probe-rs chip `RP235x`), on core 0, in the
//! Secure state, on its reset clock.

pub use super::probe::*;

/// The image definition the boot ROM looks for in the first 4 KiB of flash (RP2350 datasheet, 5.9
/// "Metadata block details"): one block holding an `IMAGE_DEF` item for a Secure Arm executable for the
/// RP2350, and its `LAST` item. `memory/rp2350.x` places `.start_block` right after the vector table.
#[link_section = ".start_block"]
#[used]
static IMAGE_DEF: [u32; 5] = [
    0xffff_ded3, // PICOBIN_BLOCK_MARKER_START
    0x1021_0142, // IMAGE_TYPE item, one word: EXE | SECURITY_S | CPU_ARM | CHIP_RP2350
    0x0000_01ff, // LAST item: the items before it take one word
    0x0000_0000, // link to the next block: itself (the only block)
    0xab12_3579, // PICOBIN_BLOCK_MARKER_END
];
