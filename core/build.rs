//! Names for the cores that run the assembly loops with an FPU, on a 32-bit Arm target with the
//! hard-float ABI and the `dsp` feature: `fpu_asm` on all of them (Cortex-M4F, M7, M33, and the
//! Helium M55), for the loops outside the matmul kernels; `dsp_fpu` without `mve` (M4F, M7, M33),
//! for the DSP kernel, which Helium replaces.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dsp_fpu)");
    println!("cargo::rustc-check-cfg=cfg(fpu_asm)");
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    let target = |key: &str| std::env::var(format!("CARGO_CFG_TARGET_{key}")).unwrap_or_default();
    let fpu = feature("DSP") && target("ARCH") == "arm" && target("ABI") == "eabihf";
    if fpu && !feature("MVE") {
        println!("cargo::rustc-cfg=dsp_fpu");
    }
    // The loops outside the matmul kernels in assembly (quantisation, norms, softmax, attention):
    // every core with the DSP instructions and an FPU, Helium ones too.
    if fpu {
        println!("cargo::rustc-cfg=fpu_asm");
    }
}
