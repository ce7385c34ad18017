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

/// Whether AVX-512 may be used: unless the environment variable `MICROLENS_SIMD` is `avx2` (read
/// once), which measures the host as a CPU without AVX-512 runs it (the same bits either way).
#[cfg(target_arch = "x86_64")]
fn avx512_allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var_os("MICROLENS_SIMD").is_none_or(|v| v != "avx2"))
}

/// Runs `kernel` compiled for the widest vector unit the CPU has (AVX-512 unless
/// `MICROLENS_SIMD=avx2`).
#[inline(always)]
pub(crate) fn widest<K: Widest>(kernel: K) -> K::Out {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") && avx512_allowed() {
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
