//! Fidelity of quantised models, measured with `microlens fidelity`'s own code: every TransformerLens
//! fixture (converted with TransformerLens's processing) and the shipped induction model, as `f32` and
//! as f16, i8 (W8A8, int8 KV cache) and i4 (W4A8), on 200 random induction sequences of `n_ctx` tokens
//! (seed 0). The integer weights are rounded as `microlens convert` rounds them by default: GPTQ,
//! calibrated on other random sequences (seed 1).
//!
//! The measurements behind the README's figures (and the targets, several out of reach) are the
//! research crate (`research/`), not tests. `measured_fidelity_does_not_regress` keeps the figures
//! measured today, not targets: each model's mean KL within 25% of its own figure, the other metrics
//! within the worst model's.

use crate::common;

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
        (DType::F32, "b9f88b4b5eeff3ca"),
        (DType::F16, "c43e4d880be01f8e"),
        (DType::I8, "9610f066f37d763e"),
        (DType::I4, "0d55530106d4d129"),
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
    // W8A16 (`cargo xtask firmware --dtype i8 --activations i16 [--kv i16] [--tables f16]`), and
    // with a scale per group of 8 (`--dtype i8g`, W8A8 and W8A16).
    use microlens_host::quantize::{requantize_with, Plan};
    let rounding = Rounding::default_for(DType::I8);
    let (i16, kv16, f16) = (Activations::I16, Activations::I16Kv16, Some(DType::F16));
    for (dtype, activations, tables, device) in [
        (DType::I8, i16, None, "1bc251756cefa97c"),
        (DType::I8, i16, f16, "c5ffe5484de3346a"),
        (DType::I8, kv16, None, "165e7a39ca4b2161"),
        (DType::I8, kv16, f16, "d534034c14bd1b36"),
        (DType::I8G, Activations::I8, None, "e923d0b6a9901520"),
        (DType::I8G, i16, None, "0a4800a3885a2606"),
        (DType::I8G, kv16, None, "a24560159d586321"),
        (DType::I8G, kv16, f16, "1be8222c34ad8f7e"),
    ] {
        let plan = Plan::with_tables(dtype, activations, tables).unwrap();
        let blob = requantize_with(&model, plan, activations, &rounding).unwrap();
        let out = microlens_host::eval::run::run_blob(&blob, &tokens).unwrap();
        let hash = microlens_host::hash::logits_hash(out.logits.iter().map(Vec::as_slice));
        let build = format!("{} {} {tables:?}", dtype.name(), activations.name());
        assert_eq!(format!("{hash:016x}"), device, "{build}");
    }
}

/// The logits hash QEMU's Cortex-M4F printed for the shipped byte-level model as int8 on its prompt
/// (`cargo xtask firmware --model bytes`: `tiny models read text. ` twice): the host computes the
/// same bits.
#[test]
fn byte_model_hash_equals_the_device_one() {
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../firmware-example/model");
    let ckpt = dir.join("induction-bytes.safetensors");
    let f32_blob = microlens_host::convert::convert(&ckpt, &Default::default())
        .unwrap()
        .blob;
    let blob = requantize(&Model::from_bytes(&f32_blob).unwrap(), DType::I8);
    let tokens: Vec<u32> = "tiny models read text. "
        .repeat(2)
        .bytes()
        .map(u32::from)
        .collect();
    let out = microlens_host::eval::run::run_blob(&blob, &tokens).unwrap();
    let hash = microlens_host::hash::logits_hash(out.logits.iter().map(Vec::as_slice));
    assert_eq!(format!("{hash:016x}"), "5d797d90406cc4ab");
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

/// W8A16 (`convert --dtype i8 --activations i16`, and with `--kv i16`; int8 matrices rounded against
/// their inputs and their output Fisher) on every model (the random fixtures, the shipped model and
/// the first shipped one), and with `--kv i16 --tables f16`; then the
/// same three with a scale per group of 8 weights (`--dtype i8g`): better than W8A8 everywhere,
/// within 25% of today's mean KL per model, induction scores within the 1e-3, mean KL <= 1e-4
/// except where measured above it (docs/fidelity.md, W8A16: `hf_gpt2` and `nonorm_1l`, whose int8
/// matmul weights with one scale per row cost more; with `i8g --kv i16 --tables f16` on every
/// model), top-1 on the repeated part >= 99.9% on the two trained models (the first with the int16
/// KV cache) and, at the positions that are not near-ties of the candidate's own margin noise, on
/// every model.
#[test]
fn w8a16_fidelity_does_not_regress() {
    use microlens_host::quantize::{requantize_with, Plan};
    // Mean KL against f32 measured with `microlens fidelity` (200 sequences, seed 0), by build below.
    let measured: [(&str, [f64; 6]); 10] = [
        (
            "attn_only_2l",
            [6.10e-5, 4.23e-5, 2.74e-5, 3.98e-5, 2.20e-5, 1.42e-5],
        ),
        (
            "gpt2_like",
            [5.22e-5, 3.69e-5, 2.43e-5, 3.45e-5, 1.95e-5, 1.25e-5],
        ),
        (
            "shortformer",
            [7.95e-5, 5.59e-5, 2.54e-5, 5.31e-5, 3.18e-5, 1.64e-5],
        ),
        (
            "lnpre_relu_3l",
            [5.01e-5, 3.32e-5, 2.19e-5, 3.40e-5, 1.73e-5, 1.15e-5],
        ),
        (
            "nonorm_1l",
            [1.96e-4, 1.41e-4, 9.02e-5, 1.30e-4, 7.76e-5, 4.76e-5],
        ),
        (
            "rotary_rms",
            [6.52e-5, 4.88e-5, 3.83e-5, 4.30e-5, 2.65e-5, 2.03e-5],
        ),
        (
            "rotary_adjacent_rmspre",
            [3.11e-5, 2.45e-5, 1.68e-5, 2.07e-5, 1.41e-5, 9.21e-6],
        ),
        (
            "hf_gpt2",
            [3.49e-4, 2.71e-4, 1.81e-4, 2.20e-4, 1.43e-4, 8.69e-5],
        ),
        (
            "induction-2l",
            [3.11e-5, 1.43e-5, 9.07e-6, 2.33e-5, 7.15e-6, 3.91e-6],
        ),
        (
            "induction-2l-distinct",
            [5.79e-5, 3.00e-5, 1.50e-5, 4.25e-5, 1.27e-5, 6.63e-6],
        ),
    ];
    // Where mean KL stays above the 1e-4 goal (docs/fidelity.md: the floor that stops it), by build.
    let above_goal = [
        ("hf_gpt2", 0),
        ("hf_gpt2", 1),
        ("hf_gpt2", 2),
        ("nonorm_1l", 0),
        ("nonorm_1l", 1),
        ("hf_gpt2", 3),
        ("hf_gpt2", 4),
        ("nonorm_1l", 3),
    ];
    let f16 = Some(DType::F16);
    let builds = [
        ("W8A16", DType::I8, Activations::I16, None),
        ("int16 KV", DType::I8, Activations::I16Kv16, None),
        ("int16 KV, f16 tables", DType::I8, Activations::I16Kv16, f16),
        ("i8g", DType::I8G, Activations::I16, None),
        ("i8g, int16 KV", DType::I8G, Activations::I16Kv16, None),
        (
            "i8g, int16 KV, f16 tables",
            DType::I8G,
            Activations::I16Kv16,
            f16,
        ),
    ];
    let mut misses = Vec::new();
    // The random fixtures, the shipped model and the first shipped one (trained too).
    let mut models = common::fidelity::models();
    models.push(("induction-2l-distinct", common::fidelity::first_shipped()));
    for (name, blob) in models {
        let reference = Model::from_bytes(&blob).unwrap();
        let seqs = common::fidelity::evaluation_sequences(reference.config());
        let rounding = Rounding::default_for(DType::I8);
        let report = |dtype, activations, tables| {
            let plan = Plan::with_tables(dtype, activations, tables).unwrap();
            let blob = requantize_with(&reference, plan, activations, &rounding).unwrap();
            compare(&reference, &Model::from_bytes(&blob).unwrap(), &seqs, || {}).unwrap()
        };
        let a8 = report(DType::I8, Activations::I8, None);
        let &(_, limits) = measured.iter().find(|m| m.0 == name).unwrap();
        for (k, (build, dtype, act, tables)) in builds.into_iter().enumerate() {
            let r = report(dtype, act, tables);
            let m = &r.model;
            println!(
                "{name:24} {build:26}: mean KL {:.2e} (W8A8 {:.2e}) top-1 {:.4} (repeated part {:.4}, \
                 {:.4} without near-ties; flips at margins <= {:.1e}) attention {:.2e} induction {:.1e}",
                m.mean_kl,
                a8.model.mean_kl,
                m.top1_agreement,
                m.top1_agreement_repeated,
                m.top1_agreement_repeated_decisive,
                m.top1_flip_max_margin,
                r.pattern_max_abs_diff,
                r.induction_score_max_change
            );
            // The repeated part's top-1 goal on the trained models: the shipped one in every
            // build, the first shipped one with the int16 KV cache (99.80-99.89% with the int8 one).
            let shipped = name == "induction-2l";
            let first = name == "induction-2l-distinct" && act == Activations::I16Kv16;
            let top1_goal = shipped || first;
            let checks = [
                ("mean KL", m.mean_kl <= 1.25 * limits[k]),
                ("below W8A8", m.mean_kl < a8.model.mean_kl),
                ("induction", r.induction_score_max_change <= 1e-3),
                (
                    "goal KL",
                    m.mean_kl <= 1e-4 || above_goal.contains(&(name, k)),
                ),
                (
                    "goal top-1",
                    !top1_goal || m.top1_agreement_repeated >= 0.999,
                ),
                (
                    "top-1 without near-ties",
                    m.top1_agreement_repeated_decisive >= 0.999,
                ),
            ];
            let missed = checks.iter().filter(|(_, ok)| !ok);
            misses.extend(missed.map(|(what, _)| format!("{name} {build} {what}")));
        }
    }
    assert!(misses.is_empty(), "{misses:#?}");
}

/// The integer softmax and norms inside the shipped model's f32 forward (`fidelity --emulate-integer
/// softmax,norm`, docs/fidelity.md: mean KL 6.26e-8, largest induction change 1.4e-5), within 50%.
#[test]
fn integer_steps_on_the_shipped_model_do_not_regress() {
    use microlens_host::eval::integer_emulation::{IntegerEmulation, IntegerStep};
    use microlens_host::fidelity::compare_with;
    use microlens_host::quantize::calibration::Source;
    use microlens_host::quantize::ranges::Ranges;
    let blob = shipped();
    let model = Model::from_bytes(&blob).unwrap();
    let ranges = Ranges::calibrate(&model, &Source::default().sequences(&model).unwrap()).unwrap();
    let steps = [IntegerStep::Softmax, IntegerStep::Norm];
    let mut emulation = IntegerEmulation::new(&model, &steps, ranges).unwrap();
    let seqs = common::fidelity::evaluation_sequences(model.config());
    let r = compare_with(&model, &model, &mut emulation, &seqs, || {}).unwrap();
    let (kl, induction) = (r.model.mean_kl, r.induction_score_max_change);
    assert!(kl > 0.0 && kl <= 6.26e-8 * 1.5, "mean KL {kl:e}");
    assert!(induction <= 1.4e-5 * 1.5, "induction change {induction:e}");
    assert!(r.model.top1_agreement_repeated >= 0.999);
}
