//! The host's vector units: a loop compiled for the widest one the CPU has (AVX-512F, else AVX, else
//! the baseline), chosen at run time. The same operations in the same order on wider registers: none
//! of these feature sets enables a fused multiply-add, and Rust never contracts.
#![allow(unsafe_code)]

/// A loop to compile for each vector unit: [`Widest::run`] must be `#[inline(always)]`, so that its
/// body is compiled inside each unit's entry.
pub(crate) trait Widest {
    /// What the loop returns.
    type Out;
    /// The loop.
    fn run(self) -> Self::Out;
}

/// Runs `kernel` compiled for the widest vector unit the CPU has.
#[inline(always)]
pub(crate) fn widest<K: Widest>(kernel: K) -> K::Out {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (just detected), the only requirement of `avx512`.
            return unsafe { avx512(kernel) };
        }
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU has AVX (just detected), the only requirement of `avx`.
            return unsafe { avx(kernel) };
        }
    }
    kernel.run()
}

/// `kernel` with AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn avx512<K: Widest>(kernel: K) -> K::Out {
    kernel.run()
}

/// `kernel` with AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn avx<K: Widest>(kernel: K) -> K::Out {
    kernel.run()
}
