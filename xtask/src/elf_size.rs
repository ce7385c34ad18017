//! Flash and RAM of a firmware, from its ELF section headers (no binutils needed).
//!
//! Allocated sections are classed by their flags: executable is text (with the vector table),
//! writable with contents is data (in RAM, and its initial values in flash), without contents (NOBITS)
//! is bss (with `.uninit`), and the rest is rodata (the blob lives there). The stack reserve is the value
//! of the `_stack_reserve` symbol of `memory.x`, the session's context that of `_microlens_context`,
//! and the board the one the firmware's `build.rs` names `_microlens_board_<name>` (`-` as `_`).

use std::path::Path;

use anyhow::{Context, Result};
use object::elf::{FileHeader32, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE, SHT_NOBITS, SHT_SYMTAB};
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::Endianness;

use crate::boards::Board;

/// Section sizes in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sizes {
    /// Code and the vector table.
    pub text: u64,
    /// Read-only data, including the blob.
    pub rodata: u64,
    /// Initialised statics.
    pub data: u64,
    /// Zero-initialised and uninitialised statics.
    pub bss: u64,
    /// Stack reserved by `memory.x`.
    pub stack_reserve: u64,
    /// The session's context in positions (`_microlens_context`, from the firmware's `build.rs`).
    pub context: u64,
    /// The board's RAM in bytes (`_microlens_ram`, from the firmware's `build.rs`).
    pub board_ram: u64,
}

impl Sizes {
    /// Flash: text + rodata + data (its initial values).
    pub fn flash(&self) -> u64 {
        self.text + self.rodata + self.data
    }

    /// RAM: data + bss + the stack reserve.
    pub fn ram(&self) -> u64 {
        self.data + self.bss + self.stack_reserve
    }
}

/// Reads the sizes of the ELF at `path`.
pub fn read(path: &Path) -> Result<Sizes> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let data = &bytes[..];
    let header = FileHeader32::<Endianness>::parse(data).context("not a 32-bit ELF")?;
    let endian = header.endian()?;
    let sections = header.sections(endian, data)?;
    let mut sizes = Sizes::default();
    for section in sections.iter() {
        let flags = section.sh_flags(endian).0;
        let size = u64::from(section.sh_size(endian));
        // riscv-rt's `.heap` and `.stack` are placeholders for the free RAM above the statics (the stack
        // is counted as the reserve).
        let name = sections.section_name(endian, section).unwrap_or_default();
        if flags & SHF_ALLOC.0 == 0 || name == b".stack" || name == b".heap" {
            continue;
        }
        let class = if flags & SHF_EXECINSTR.0 != 0 {
            &mut sizes.text
        } else if section.sh_type(endian) == SHT_NOBITS {
            &mut sizes.bss
        } else if flags & SHF_WRITE.0 != 0 {
            &mut sizes.data
        } else {
            &mut sizes.rodata
        };
        *class += size;
    }
    let symbols = sections.symbols(endian, data, SHT_SYMTAB)?;
    let symbol = |name: &str| {
        symbols
            .iter()
            .find(|s| s.name(endian, symbols.strings()) == Ok(name.as_bytes()))
            .map(|s| u64::from(s.st_value(endian)))
    };
    sizes.stack_reserve =
        symbol("_stack_reserve").context("no _stack_reserve symbol (set in memory.x)")?;
    sizes.context = symbol("_microlens_context")
        .context("no _microlens_context symbol (set by the firmware's build.rs)")?;
    sizes.board_ram = symbol("_microlens_ram")
        .context("no _microlens_ram symbol (set by the firmware's build.rs)")?;
    Ok(sizes)
}

/// The board the firmware ELF at `path` was built for, from its `_microlens_board_<name>` symbol.
pub fn board(path: &Path) -> Result<Board> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let data = &bytes[..];
    let header = FileHeader32::<Endianness>::parse(data).context("not a 32-bit ELF")?;
    let endian = header.endian()?;
    let symbols = header
        .sections(endian, data)?
        .symbols(endian, data, SHT_SYMTAB)?;
    let named = symbols.iter().find_map(|s| {
        let name = s.name(endian, symbols.strings()).ok()?;
        let board = name.strip_prefix(b"_microlens_board_")?;
        let board = String::from_utf8_lossy(board).replace('_', "-");
        Board::ALL.into_iter().find(|b| b.name() == board)
    });
    named.with_context(|| {
        format!(
            "{}: no _microlens_board_<name> symbol of a known board (set by the firmware's build.rs)",
            path.display()
        )
    })
}
