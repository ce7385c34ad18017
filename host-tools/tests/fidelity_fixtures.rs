//! Fidelity of quantised models, measured with `microlens fidelity`'s own code: every TransformerLens
//! fixture (converted with TransformerLens's processing) and the shipped induction model, as `f32` and
//! as f16, i8 (W8A8, int8 KV cache) and i4 (W4A8), on 200 random induction sequences of `n_ctx` tokens
//! (seed 0). The integer weights are rounded as `microlens convert` rounds them by default: GPTQ,
//! calibrated on other random sequences (seed 1).
//!
//! The measurements behind the README's figures (and the targets, several out of reach) are the
//! `fidelity_research` example, not tests. `measured_fidelity_does_not_regress` keeps the figures
//! measured today, not targets: each model's mean KL within 25% of its own figure, the other metrics
//! within the worst model's.

mod common;

use microlens::{Activations, DType, Model};
use microlens_host::eval::sequences::induction_sequences;
use microlens_host::fidelity::compare;
use microlens_host::quantize::{requantize as requantize_blob, Rounding};

use common::fidelity::{misses, models, requantize, shipped, Limits};

#[test]
fn measured_fidelity_does_not_regress() {
    let models = models();
    let mut all = Vec::new();
    for (dtype, limits) in [
        (
            DType::F16,
            Limits {
                mean_kl: 6.2e-7,
                mean_kl_by_model: &[
                    ("attn_only_2l", 8.500e-08),
                    ("gpt2_like", 8.700e-08),
                    ("shortformer", 1.134e-07),
                    ("lnpre_relu_3l", 7.575e-08),
                    ("nonorm_1l", 3.675e-07),
                    ("rotary_rms", 9.788e-08),
                    ("rotary_adjacent_rmspre", 5.900e-08),
                    ("hf_gpt2", 6.200e-07),
                    ("induction-2l", 2.811e-08),
                ],
                top1: 0.997,
                attention: 4.8e-3,
                induction: 2e-5,
            },
        ),
        (
            DType::I8,
            Limits {
                mean_kl: 1.115e-03,
                mean_kl_by_model: &[
                    ("attn_only_2l", 1.875e-04),
                    ("gpt2_like", 1.788e-04),
                    ("shortformer", 2.225e-04),
                    ("lnpre_relu_3l", 1.675e-04),
                    ("nonorm_1l", 6.562e-04),
                    ("rotary_rms", 1.512e-04),
                    ("rotary_adjacent_rmspre", 7.900e-05),
                    ("hf_gpt2", 1.115e-03),
                    ("induction-2l", 1.838e-04),
                ],
                top1: 0.945,
                attention: 0.14,
                induction: 4.4e-4,
            },
        ),
        (
            DType::I4,
            Limits {
                mean_kl: 9.737e-02,
                mean_kl_by_model: &[
                    ("attn_only_2l", 1.550e-02),
                    ("gpt2_like", 1.512e-02),
                    ("shortformer", 1.975e-02),
                    ("lnpre_relu_3l", 1.166e-02),
                    ("nonorm_1l", 5.788e-02),
                    ("rotary_rms", 1.813e-02),
                    ("rotary_adjacent_rmspre", 9.938e-03),
                    ("hf_gpt2", 9.737e-02),
                    ("induction-2l", 5.250e-03),
                ],
                top1: 0.75,
                attention: 0.95,
                induction: 5e-3,
            },
        ),
    ] {
        all.extend(misses(&models, dtype, limits, "measured ceiling"));
    }
    assert!(all.is_empty(), "worse than measured: {all:#?}");
}

#[test]
fn the_shipped_int8_blob_is_at_most_0_27_of_the_f32_blob() {
    let f32_blob = shipped();
    let model = Model::from_bytes(&f32_blob).unwrap();
    let i8_blob = requantize(&model, DType::I8);
    let ratio = i8_blob.len() as f64 / f32_blob.len() as f64;
    println!(
        "int8 {} B / f32 {} B = {ratio:.4}",
        i8_blob.len(),
        f32_blob.len()
    );
    assert!(ratio <= 0.27, "{ratio}");
}

/// The firmware's default prompt (seed `0x6d69_6372_6f6c_656e`).
const FIRMWARE_PROMPT: &str =
    "44,50,45,20,7,24,42,9,36,27,32,52,2,54,5,10,22,1,12,50,21,57,23,29,35,3,17,26,13,34,\
    40,28,45,20,7,24,42,9,36,27,32,52,2,54,5,10,22,1,12,50,21,57,23,29,35,3,17,26,13,34,40,28,45";

/// The logits hashes QEMU's Cortex-M4F printed for the shipped model on the firmware's prompt
/// (`cargo xtask firmware --dtype ...`, which converts with the default rounding): the host computes
/// the same bits.
#[test]
fn shipped_model_hashes_equal_the_device_ones() {
    let f32_blob = shipped();
    let model = Model::from_bytes(&f32_blob).unwrap();
    let tokens = microlens_host::io::tokens::parse_tokens(FIRMWARE_PROMPT).unwrap();
    for (dtype, device) in [
        (DType::F32, "52c00c8749984557"),
        (DType::F16, "24b8a3b589e79637"),
        (DType::I8, "49d0d88984c8bcde"),
        (DType::I4, "a5c6ba687bc1a8fa"),
    ] {
        let blob = requantize(&model, dtype);
        let out = microlens_host::eval::run::run_blob(&blob, &tokens).unwrap();
        let hash = microlens_host::hash::logits_hash(out.logits.iter().map(Vec::as_slice));
        assert_eq!(format!("{hash:016x}"), device, "{}", dtype.name());
        // The host's column-blocked weights compute the same bits.
        let m = Model::from_bytes(&blob).unwrap();
        let host = microlens::host::HostWeights::new(&m);
        let out = microlens_host::eval::run::run_model(&m.with_host(&host), &tokens).unwrap();
        let hash = microlens_host::hash::logits_hash(out.logits.iter().map(Vec::as_slice));
        assert_eq!(format!("{hash:016x}"), device, "{} (host)", dtype.name());
    }
}

/// The int8 emulation is what the device does: the int8-weight model with `f32` activations, run with
/// every int8 rounding emulated, comes within 15% of the real W8A8 model's mean KL (measured: +1% on the
/// shipped model, +2% on attn_only_2l).
#[test]
fn int8_emulation_matches_the_real_int8_model() {
    use microlens_host::eval::emulation::{Int8Emulation, Int8Rounding};
    use microlens_host::fidelity::compare_with;
    for blob in [shipped(), common::blob("attn_only_2l", true)] {
        let reference = Model::from_bytes(&blob).unwrap();
        let cfg = reference.config();
        let seqs = induction_sequences(100, cfg.n_ctx, cfg.d_vocab, 0);
        let rounding = Rounding::default_for(DType::I8);
        let weights = requantize_blob(&reference, DType::I8, Activations::F32, &rounding).unwrap();
        let weights = Model::from_bytes(&weights).unwrap();
        let mut hooks = Int8Emulation::new(&weights, &Int8Rounding::ALL);
        let emulated = compare_with(&reference, &weights, &mut hooks, &seqs, || {}).unwrap();
        let real = requantize(&reference, DType::I8);
        let real = compare(&reference, &Model::from_bytes(&real).unwrap(), &seqs, || {}).unwrap();
        let (e, r) = (emulated.model.mean_kl, real.model.mean_kl);
        println!("emulated {e:.3e} real {r:.3e}");
        assert!(
            (e / r - 1.0).abs() < 0.15,
            "emulated {e:.3e} vs real {r:.3e}"
        );
    }
}
