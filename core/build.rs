//! Chooses the kernels' target once, as the `cfg` `microlens_arch` (`src/arch/mod.rs`):
//! `armv7em` (feature `dsp` on 32-bit Arm with the hard-float ABI: Cortex-M4F, M7, M33), `mve`
//! (feature `mve` there: Cortex-M55, M85), `host` (feature `std` otherwise), `armv7m` (Thumb-2 Arm
//! without the DSP extension: Cortex-M3), `armv6m` (Cortex-M0, M0+), `rv32im` (RV32 with multiplies), `portable` (everything else). A new target is one more arm here, one folder in `src/arch/` and one line in its facade.

fn main() {
    println!(
        "cargo::rustc-check-cfg=cfg(microlens_arch, values(\"armv7em\", \"mve\", \"armv7m\", \"armv6m\", \"rv32im\", \"host\", \"portable\"))"
    );
    let feature = |name: &str| std::env::var_os(format!("CARGO_FEATURE_{name}")).is_some();
    let target = |key: &str| std::env::var(format!("CARGO_CFG_TARGET_{key}")).unwrap_or_default();
    let features = target("FEATURE");
    let has = |f: &str| features.split(',').any(|x| x == f);
    let hard_float_arm = target("ARCH") == "arm" && target("ABI") == "eabihf";
    let arch = match () {
        _ if hard_float_arm && feature("MVE") => "mve",
        _ if hard_float_arm && feature("DSP") => "armv7em",
        _ if feature("STD") => "host",
        _ if target("ARCH") == "arm" && has("thumb2") && !has("dsp") => "armv7m",
        _ if target("ARCH") == "arm" && has("v6") && !has("thumb2") => "armv6m",
        _ if target("ARCH") == "riscv32" && has("m") => "rv32im",
        _ => "portable",
    };
    if feature("DSP") && arch != "armv7em" && arch != "mve" {
        println!(
            "cargo::warning=microlens: the feature `dsp` needs a 32-bit Arm target with the hard-float \
             ABI (thumbv7em-none-eabihf, thumbv8m.main-none-eabihf); building the {arch} kernels"
        );
    }
    println!("cargo::rustc-cfg=microlens_arch=\"{arch}\"");
}
