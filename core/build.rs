//! One name for the cores that run the assembly loops with an FPU: `dsp_fpu` when the `dsp` feature
//! is on without `mve`, on a 32-bit Arm target with the hard-float ABI (Cortex-M4F, M7, M33).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dsp_fpu)");
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    let target = |key: &str| std::env::var(format!("CARGO_CFG_TARGET_{key}")).unwrap_or_default();
    if feature("DSP") && !feature("MVE") && target("ARCH") == "arm" && target("ABI") == "eabihf" {
        println!("cargo::rustc-cfg=dsp_fpu");
    }
}
