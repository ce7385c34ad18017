//! The kernels: every piece of target-specific code of the crate (assembly, SIMD, `unsafe`), one
//! folder per target family, behind this facade of entry points. `build.rs` chooses the target once,
//! as the `cfg` `microlens_arch`:
//!
//! | `microlens_arch` | when | folder |
//! |---|---|---|
//! | `armv7em` | feature `dsp`, 32-bit Arm, hard float (Cortex-M4F, M7, M33) | `armv7em/`: the DSP instructions, the int8/int4/int16 loops and the FPU's float loops in assembly |
//! | `mve` | feature `mve`, 32-bit Arm, hard float (Cortex-M55, M85) | `mve/`: the Helium four-row int8 kernels, the rest `armv7em/`'s |
//! | `armv7m` | Thumb-2 Arm without the DSP extension (Cortex-M3) | `armv7m/`: the int8 matmuls' four-row loop in assembly (`LDRSB` and `MLA`), the rest `portable/`'s |
//! | `armv6m` | ARMv6-M (Cortex-M0, M0+) | `armv6m/`: the int8 matmuls' four-row loop in assembly (`LDRB`, `SXTB`, `MULS`), the rest `portable/`'s |
//! | `rv32im` | RV32 with the `M` extension (RV32IMAC) | `rv32im/`: the int8 matmuls' four-row loop in assembly (`LH`, `LB`, `MUL`), the rest `portable/`'s |
//! | `host` | feature `std` otherwise (x86-64 and every host) | `host/`: the int8 kernels, the softmax's exponentials and the blocked products with AVX2/AVX/AVX-512 where the CPU has them |
//! | `portable` | everything else | `portable/`: plain Rust |
//!
//! Every target computes the same bits: the same integer sums and the same float operations in the
//! same order. A target's folder supplies each entry below (its own kernel, or `portable/`'s); a new
//! target is one folder and one `use` line here. `portable/` also holds the plain Rust the others
//! share and fall back to; an entry that returns `None` (or 0, or `false`) there has no kernel on
//! that target, and the caller's own Rust runs.

#[cfg(microlens_arch = "armv6m")]
mod armv6m;
#[cfg(any(microlens_arch = "armv7em", microlens_arch = "mve"))]
mod armv7em;
#[cfg(microlens_arch = "armv7m")]
mod armv7m;
#[cfg(microlens_arch = "host")]
mod host;
#[cfg(microlens_arch = "mve")]
mod mve;
#[cfg(microlens_arch = "rv32im")]
mod rv32im;
// The fallbacks a target with its own kernels leaves unused.
#[allow(dead_code, unused_imports)]
mod portable;

// The one line per target.
#[cfg(microlens_arch = "armv6m")]
use armv6m as target;
#[cfg(microlens_arch = "armv7em")]
use armv7em as target;
#[cfg(microlens_arch = "armv7m")]
use armv7m as target;
#[cfg(microlens_arch = "host")]
use host as target;
#[cfg(microlens_arch = "mve")]
use mve as target;
#[cfg(microlens_arch = "portable")]
use portable as target;
#[cfg(microlens_arch = "rv32im")]
use rv32im as target;

// The target's kernels.
pub(crate) use target::{
    add, centre4, divide4, dot4_quads, dot4_rescaled, dot4_strided, exp_shifted, i8g_rows2,
    int4_matvec8, kv_heads8, mul_wide, mul_wide_u, pack_lanes, quad_f16, quad_f32, quantize16,
    quantize8, quantize8_i4, rescale, scores, smlad, smlald, sqrt, store_strided, sum4,
    sums4_lanes16, sxtb16, sxtb16_ror8, weight_bits, KV_HEADS8, RESCALES_QUADS,
};
#[cfg(feature = "std")]
pub(crate) use target::{widest, Widest};

// Plain Rust every target shares, built on the target's instructions above.
pub(crate) use portable::attention::{fixed, lanes};
pub(crate) use portable::lanes::{dot_lanes16, lane_word, mac_lanes, sum_to_f32, sums4_f32, word};
pub(crate) use portable::nibbles::{nibble, nibbles_dot};

/// An int8 quantisation's parts (`quantize8`): the values, their 16-bit lanes and the scale.
pub(crate) type Int8Parts<'q> = (&'q [i8], &'q [u32], f32);

/// An int16 quantisation's parts (`quantize16`): the values' words (their lanes), the values and
/// the scale.
pub(crate) type Int16Parts<'q> = (&'q [u32], &'q [i16], f32);

/// Items inlined one way on the targets with the assembly loops (`armv7em`, `mve`) and, after
/// `else`, another elsewhere (as the compiler sees fit without one): `inline(never)` keeps an item's
/// registers off the assembly's calls, `inline(always)` a table lookup's fields out of memory.
macro_rules! on_assembly_targets {
    (inline($here:ident) $(, else inline($there:ident))?; $($item:tt)*) => {
        #[cfg_attr(any(microlens_arch = "armv7em", microlens_arch = "mve"), inline($here))]
        $(#[cfg_attr(not(any(microlens_arch = "armv7em", microlens_arch = "mve")), inline($there))])?
        $($item)*
    };
}
pub(crate) use on_assembly_targets;

/// The four-row int8 kernels' signature (`dot4_strided`, `dot4_quads`).
#[cfg(test)]
pub(crate) type Dot4 = fn(&[u8], usize, &[u32], &mut [i32]);

/// Every `dot4_quads` this build compiles besides the target's: for the tests that hold them to
/// each other.
#[cfg(test)]
pub(crate) fn other_dot4_quads() -> std::vec::Vec<Dot4> {
    let mut all: std::vec::Vec<Dot4> = std::vec![portable::lanes::dot4_quads_portable];
    #[cfg(microlens_arch = "host")]
    all.push(host::dot4::dot4_quads_plain);
    all
}

/// Every `dot4_strided` this build compiles besides the target's.
#[cfg(test)]
pub(crate) fn other_dot4_strided() -> std::vec::Vec<Dot4> {
    std::vec![portable::lanes::dot4_strided_portable]
}
