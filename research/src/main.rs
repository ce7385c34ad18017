//! Research measurements of quantised models' fidelity, the commands behind the figures of
//! docs/quantisation.md and docs/fidelity.md: where the error comes from, how it scales, how far
//! the int4 weights are from their floors, and the issue's targets as written (several out of
//! reach: the logit noise of int8 activations and weights flips the arg-max where a model's
//! next-token distribution is nearly flat, and int8 queries and keys move sharp attention rows by
//! more than 1/256, whatever the weights). Each prints a table; `issue_targets` panics listing the
//! targets missed.
//!
//! ```text
//! cargo run --release -p microlens-research -- NAME
//! ```

// The fixtures and the fidelity measurement the host tools' tests use (`host-tools/tests/suite/common`).
#[path = "../../host-tools/tests/suite/common/mod.rs"]
mod common;

use microlens::blob::TensorData;
use microlens::{Activations, DType, Model};
use microlens_host::fidelity::{compare, Report};
use microlens_host::quantize::encode::default_activations;
use microlens_host::quantize::{nearest_tensors, requantize as requantize_blob, Rounding};

use common::fidelity::{evaluation_sequences, fidelity, misses, models, shipped, Limits, NO_LIMIT};

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let all: [(&str, fn()); 11] = [
        (
            "output_fisher_for_w8a8_and_w4a8",
            output_fisher_for_w8a8_and_w4a8,
        ),
        ("w8a16_repeated_part_flips", w8a16_repeated_part_flips),
        ("int8_scale_granularity", int8_scale_granularity),
        ("w8a16", w8a16),
        ("int8_weight_error_by_tensor", int8_weight_error_by_tensor),
        ("issue_targets", issue_targets),
        ("shipped_model_error_sources", shipped_model_error_sources),
        ("int8_rounding_error_sources", int8_rounding_error_sources),
        ("top1_against_int4_error_size", top1_against_int4_error_size),
        (
            "int4_error_of_the_lookup_tables",
            int4_error_of_the_lookup_tables,
        ),
        (
            "int4_error_against_its_floors",
            int4_error_against_its_floors,
        ),
    ];
    match all.iter().find(|(name, _)| *name == which) {
        Some((_, run)) => run(),
        None => {
            eprintln!("usage: cargo run --release -p microlens-research -- NAME");
            for (name, _) in all {
                eprintln!("  {name}");
            }
            std::process::exit(2);
        }
    }
}

fn issue_targets() {
    let models = models();
    let mut all = Vec::new();
    let i8_worst = Limits {
        mean_kl: 1e-3,
        mean_kl_by_model: &[],
        top1: 0.0,
        attention: NO_LIMIT,
        induction: NO_LIMIT,
    };
    for (dtype, limits, label) in [
        (
            DType::F16,
            Limits {
                mean_kl: 1e-6,
                mean_kl_by_model: &[],
                top1: 0.999,
                attention: NO_LIMIT,
                induction: NO_LIMIT,
            },
            "target",
        ),
        (
            DType::I8,
            Limits {
                mean_kl: 1e-4,
                mean_kl_by_model: &[],
                top1: 0.999,
                attention: 1.0 / 256.0,
                induction: 0.01,
            },
            "target",
        ),
        (DType::I8, i8_worst, "no worse than 1e-3 in any case"),
        (
            DType::I4,
            Limits {
                mean_kl: 1e-2,
                mean_kl_by_model: &[],
                top1: 0.97,
                attention: NO_LIMIT,
                induction: NO_LIMIT,
            },
            "target",
        ),
    ] {
        all.extend(misses(&models, dtype, limits, label));
    }
    assert!(all.is_empty(), "targets missed: {all:#?}");
}

/// Where the shipped model's error comes from: its weights alone (integer weights, `f32` activations and
/// KV cache), nearest and GPTQ rounding, against everything quantised. Prints the figures of docs/fidelity.md.
fn shipped_model_error_sources() {
    let reference = shipped();
    let reference = Model::from_bytes(&reference).unwrap();
    let seqs = evaluation_sequences(reference.config());
    for dtype in [DType::I8, DType::I4] {
        for (label, rounding) in [
            ("nearest", Rounding::Nearest),
            ("gptq", Rounding::default_for(dtype)),
        ] {
            for activations in [Activations::F32, default_activations(dtype)] {
                let blob = requantize_blob(&reference, dtype, activations, &rounding).unwrap();
                let candidate = Model::from_bytes(&blob).unwrap();
                let r = compare(&reference, &candidate, &seqs, || {}).unwrap();
                println!(
                    "{} weights, {label:7} rounding, {:?} activations: mean KL {:.2e}, top-1 {:.4}, attention {:.3}",
                    dtype.name(),
                    activations,
                    r.model.mean_kl,
                    r.model.top1_agreement,
                    r.pattern_max_abs_diff
                );
            }
        }
    }
}

/// W8A16 on every model (or the one named after the command), with int16 activations and the int8 or
/// int16 KV cache: its rows rounded independently (each matrix against its inputs alone, as W8A8),
/// coupled through the output Fisher (the default), and with that and `f16` lookup tables
/// (`--tables f16`).
fn w8a16() {
    use microlens_host::quantize::{requantize_with, Plan};
    for (name, blob) in named_models() {
        let reference = Model::from_bytes(&blob).unwrap();
        let seqs = evaluation_sequences(reference.config());
        let rounding = Rounding::default_for(DType::I8);
        for act in [Activations::I16, Activations::I16Kv16] {
            let default = Plan::of(DType::I8, act);
            let plans = [
                (
                    "rows independent",
                    Plan {
                        output_fisher: false,
                        ..default
                    },
                ),
                ("output Fisher", default),
                (
                    "f16 tables",
                    Plan::with_tables(DType::I8, act, Some(DType::F16)).unwrap(),
                ),
            ];
            for (label, plan) in plans {
                let blob = requantize_with(&reference, plan, act, &rounding).unwrap();
                let r =
                    compare(&reference, &Model::from_bytes(&blob).unwrap(), &seqs, || {}).unwrap();
                let m = &r.model;
                println!(
                    "{name:24} {:9} {label:16} {:6} B: mean KL {:.3e} top-1 {:.4} repeated {:.4} \
                     ({:.4} at {} of {} beyond 3 × margin noise {:.1e}) flip margin {:.3} attention {:.2e} induction {:.1e}",
                    act.name(),
                    blob.len(),
                    m.mean_kl,
                    m.top1_agreement,
                    m.top1_agreement_repeated,
                    m.top1_agreement_repeated_decisive,
                    m.repeated_decisive_positions,
                    m.repeated_positions,
                    m.top1_margin_noise,
                    m.top1_flip_max_margin,
                    r.pattern_max_abs_diff,
                    r.induction_score_max_change
                );
            }
        }
    }
}

/// What W8A16's output-Fisher rounding ([`microlens_host::quantize::Plan::output_fisher`]) would do
/// for W8A8 and W4A8, whose default rounds each row independently (their blobs and pinned hashes as
/// they are): mean KL of each, default and with the rows coupled.
fn output_fisher_for_w8a8_and_w4a8() {
    use microlens_host::quantize::{requantize_with, Plan};
    for (name, blob) in named_models() {
        let reference = Model::from_bytes(&blob).unwrap();
        let seqs = evaluation_sequences(reference.config());
        for dtype in [DType::I8, DType::I4] {
            let act = default_activations(dtype);
            let rounding = Rounding::default_for(dtype);
            let kl = |plan: Plan| {
                let blob = requantize_with(&reference, plan, act, &rounding).unwrap();
                let m = Model::from_bytes(&blob).unwrap();
                compare(&reference, &m, &seqs, || {}).unwrap().model.mean_kl
            };
            let default = Plan::of(dtype, act);
            let (a, b) = (
                kl(default),
                kl(Plan {
                    output_fisher: true,
                    ..default
                }),
            );
            println!(
                "{name:24} {}: mean KL {a:.3e}, rows coupled through the output Fisher {b:.3e} ({:+.0}%)",
                dtype.name(),
                100.0 * (b / a - 1.0)
            );
        }
    }
}

/// What a finer int8 scale would buy: every matrix read through an input site rounded to nearest
/// (the lookup tables exact, `f32` activations) with one scale per row, per group of 16 or 8 along
/// the row, or per row after scaling each input column by `E[x_j²]^(α/2)` (AWQ-style, the inverse
/// scale moved onto the input).
fn int8_scale_granularity() {
    use microlens_host::quantize::calibration::{record, InputPrecision, MatrixInput, Source};
    use microlens_host::quantize::encode_nearest;
    for (name, blob) in named_models() {
        let reference = Model::from_bytes(&blob).unwrap();
        let seqs = evaluation_sequences(reference.config());
        let calib = Source::default().sequences(&reference).unwrap();
        let exact = nearest_tensors(&reference, DType::F32).unwrap();
        let sites: Vec<MatrixInput> = exact.iter().filter_map(|t| MatrixInput::of(t.id)).collect();
        let inputs = record(&reference, &calib, InputPrecision::Float, &sites).unwrap();
        let round = |row: &[f32], col_scale: &[f32], group: usize| -> Vec<f32> {
            let scaled: Vec<f32> = row.iter().zip(col_scale).map(|(w, s)| w * s).collect();
            let mut out = Vec::with_capacity(row.len());
            for g in scaled.chunks(group) {
                let max = g.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let step = if max > 0.0 { max / 127.0 } else { 1.0 };
                out.extend(g.iter().map(|v| (v / step).round() * step));
            }
            out.iter().zip(col_scale).map(|(w, s)| w / s).collect()
        };
        let variant = |group: Option<usize>, alpha: f32| {
            let tensors: Vec<TensorData> = exact
                .iter()
                .map(|t| {
                    let Some(site) = MatrixInput::of(t.id) else {
                        return t.clone();
                    };
                    let [rows, n] = t.shape;
                    let x = &inputs[&site];
                    let count = (x.len() / n) as f64;
                    let scale: Vec<f32> = (0..n)
                        .map(|j| {
                            let m2 = x
                                .iter()
                                .skip(j)
                                .step_by(n)
                                .map(|v| (*v as f64).powi(2))
                                .sum::<f64>();
                            ((m2 / count).max(1e-12).powf(alpha as f64 / 2.0)) as f32
                        })
                        .collect();
                    let w = microlens_host::quantize::decode_matrix(t).unwrap();
                    let q: Vec<f32> = w
                        .chunks(n)
                        .flat_map(|row| round(row, &scale, group.unwrap_or(n)))
                        .collect();
                    assert_eq!(q.len(), rows * n);
                    encode_nearest(t.id, t.shape, &q, DType::F32).unwrap()
                })
                .collect();
            compare_tensors(&reference, &tensors, &seqs).model.mean_kl
        };
        let row = variant(None, 0.0);
        let g16 = variant(Some(16), 0.0);
        let g8 = variant(Some(8), 0.0);
        let awq: Vec<String> = [0.25f32, 0.5, 0.75]
            .iter()
            .map(|&a| format!("{a}: {:.3e}", variant(None, a)))
            .collect();
        println!(
            "{name:24} nearest int8, tables exact: per row {row:.3e}, groups of 16 {g16:.3e} ({:.2}x), groups of 8 {g8:.3e} ({:.2}x), per row with input scaling α {}",
            row / g16,
            row / g8,
            awq.join(", ")
        );
    }
}

/// Where W8A16's (int16 KV cache) top-1 flips on the repeated part happen: the reference's margin
/// (first logit minus second) at every flip, against the noise of that margin, `σ`
/// ([`microlens_host::fidelity::ModelFidelity::top1_margin_noise`]). A position whose margin is
/// below a few `σ` is a near-tie the quantisation's own noise can flip. Prints the flips by margin.
fn w8a16_repeated_part_flips() {
    use microlens_host::eval::metrics::{argmax, top1_margin};
    use microlens_host::eval::run::run_blob;
    use microlens_host::eval::sequences::repeated_positions;
    for (name, blob) in named_models() {
        let reference = Model::from_bytes(&blob).unwrap();
        let seqs = evaluation_sequences(reference.config());
        let rounding = Rounding::default_for(DType::I8);
        let cand = requantize_blob(&reference, DType::I8, Activations::I16Kv16, &rounding).unwrap();
        let report = compare(&reference, &Model::from_bytes(&cand).unwrap(), &seqs, || {}).unwrap();
        let m = &report.model;
        let sigma = m.top1_margin_noise;
        // The reference's margin at every repeated-part flip.
        let mut flips = Vec::new();
        for tokens in &seqs {
            let r = run_blob(&blob, tokens).unwrap().logits;
            let c = run_blob(&cand, tokens).unwrap().logits;
            for t in repeated_positions(tokens) {
                if argmax(&r[t]) != argmax(&c[t]) {
                    flips.push(top1_margin(&r[t]));
                }
            }
        }
        let below = |x: f64| flips.iter().filter(|&&m| m < x).count();
        let largest = flips.iter().cloned().fold(0.0, f64::max);
        println!(
            "{name:24} repeated part: {} positions, {} flips (top-1 {:.4}); flips at margins < 1e-3: {}, \
             < 1e-2: {}, < σ = {sigma:.2e}: {}, < 2σ: {}, < 3σ: {}; largest {largest:.3}; top-1 beyond 3σ: \
             {:.4} ({} positions)",
            m.repeated_positions,
            flips.len(),
            m.top1_agreement_repeated,
            below(1e-3),
            below(1e-2),
            below(sigma),
            below(2.0 * sigma),
            below(3.0 * sigma),
            m.top1_agreement_repeated_decisive,
            m.repeated_decisive_positions
        );
    }
}

/// Where the int8 weights' error comes from: each model with `f32` activations and KV cache, every
/// tensor `f32` but one kind of matrix (all its layers) as int8 weights: rounded to nearest, by the
/// default GPTQ (rows independent, int8 tables), and by W8A16's best (rows coupled through the output
/// Fisher, `f16` tables), each with the biases its GPTQ compensated. GPTQ's figures for one kind alone
/// overstate it (that kind's compensation of the others' errors then has nothing to undo), so they add
/// up to more than all of them together.
fn int8_weight_error_by_tensor() {
    use microlens::TensorKind;
    use microlens_host::quantize::{bias_of, requantize_with, Plan};
    for (name, blob) in named_models() {
        let reference = Model::from_bytes(&blob).unwrap();
        let seqs = evaluation_sequences(reference.config());
        let exact = nearest_tensors(&reference, DType::F32).unwrap();
        let rounding = Rounding::default_for(DType::I8);
        let decoded = |plan: Plan| {
            let blob = requantize_with(&reference, plan, Activations::F32, &rounding).unwrap();
            nearest_tensors(&Model::from_bytes(&blob).unwrap(), DType::F32).unwrap()
        };
        let gptq = decoded(Plan::of(DType::I8, Activations::F32));
        let best = decoded(Plan {
            tables: DType::F16,
            output_fisher: true,
            ..Plan::of(DType::I8, Activations::F32)
        });
        let near = {
            let blob = microlens_host::quantize::requantize_nearest(
                &reference,
                DType::I8,
                Activations::F32,
            )
            .unwrap();
            nearest_tensors(&Model::from_bytes(&blob).unwrap(), DType::F32).unwrap()
        };
        let kl = |pick: &dyn Fn(TensorKind) -> bool, from: &[TensorData]| {
            let tensors: Vec<_> = exact
                .iter()
                .zip(from)
                .map(|(t, q)| {
                    let take = pick(t.id.kind)
                        || (!t.id.kind.is_matrix()
                            && from.iter().any(|m| {
                                bias_of(m.id, reference.config()) == Some(t.id) && pick(m.id.kind)
                            }));
                    if take {
                        q.clone()
                    } else {
                        t.clone()
                    }
                })
                .collect();
            compare_tensors(&reference, &tensors, &seqs).model.mean_kl
        };
        let all = |from: &[TensorData]| kl(&|k: TensorKind| k.is_matrix(), from);
        let (all_n, all_g, all_b) = (all(&near), all(&gptq), all(&best));
        println!(
            "{name:24} all matrices: nearest {all_n:.3e}, gptq {all_g:.3e}, output Fisher and f16 tables {all_b:.3e}"
        );
        let mut kinds: Vec<TensorKind> = exact
            .iter()
            .map(|t| t.id.kind)
            .filter(|k| k.is_matrix())
            .collect();
        kinds.sort_by_key(|k| *k as u8);
        kinds.dedup();
        for kind in kinds {
            let one = |from: &[TensorData]| kl(&|k: TensorKind| k == kind, from);
            let (n, g, b) = (one(&near), one(&gptq), one(&best));
            println!(
                "{name:24} {:8} nearest {n:.3e} ({:4.1}%) gptq {g:.3e} ({:4.1}%) best {b:.3e} ({:4.1}%)",
                format!("{kind:?}"),
                100.0 * n / all_n,
                100.0 * g / all_g,
                100.0 * b / all_b
            );
        }
    }
}

/// What each int8 rounding of a W8A8 model costs with exact weights, emulated on the `f32` model
/// ([`Int8Emulation`]), and all of them on the int8-weight model with `f32` activations (which should
/// come close to the real W8A8 model: the emulation's check).
fn int8_rounding_error_sources() {
    use microlens_host::eval::emulation::{Int8Emulation, Int8Rounding};
    use microlens_host::fidelity::compare_with;
    for (name, blob) in models() {
        let reference = Model::from_bytes(&blob).unwrap();
        let seqs = evaluation_sequences(reference.config());
        let row = |label: &str, candidate: &Model<'_>, roundings: &[Int8Rounding]| {
            let mut hooks = Int8Emulation::new(candidate, roundings);
            let r = compare_with(&reference, candidate, &mut hooks, &seqs, || {}).unwrap();
            println!(
                "{name:24} {label:22} mean KL {:.2e} top-1 {:.4} attention {:.4}",
                r.model.mean_kl, r.model.top1_agreement, r.pattern_max_abs_diff
            );
        };
        row("inputs", &reference, &[Int8Rounding::Inputs]);
        row("queries", &reference, &[Int8Rounding::Queries]);
        row("keys", &reference, &[Int8Rounding::Keys]);
        row("values", &reference, &[Int8Rounding::Values]);
        row("all activations", &reference, &Int8Rounding::ALL);
        let rounding = Rounding::default_for(DType::I8);
        let weights = requantize_blob(&reference, DType::I8, Activations::F32, &rounding).unwrap();
        let weights = Model::from_bytes(&weights).unwrap();
        row("int8 weights alone", &weights, &[]);
        row("weights + emulated", &weights, &Int8Rounding::ALL);
        let (real, _) = fidelity(&blob, DType::I8);
        println!(
            "{name:24} {:22} mean KL {:.2e} top-1 {:.4} attention {:.4}",
            "real W8A8", real.model.mean_kl, real.model.top1_agreement, real.pattern_max_abs_diff
        );
    }
}

/// How top-1 agreement and mean KL scale with the size of the int4 weight error: each model with its
/// weights moved a fraction `a` of the way from the `f32` values to the int4 (GPTQ, `f32` activations)
/// ones, `W + a (Ŵ - W)`, stored as `f32`. Prints, per model, where top-1 agreement crosses 97% (the i4
/// target) and the mean KL there, against the mean KL at `a = 1`: the README's "what limits i4".
fn top1_against_int4_error_size() {
    use microlens_host::quantize::{decode_matrix, encode_nearest};
    const FRACTIONS: [f64; 9] = [0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0];
    for (name, blob) in models() {
        let reference = Model::from_bytes(&blob).unwrap();
        let seqs = evaluation_sequences(reference.config());
        let (int4, exact) = int4_and_exact(&reference);
        let mut points = Vec::new();
        for a in FRACTIONS {
            let tensors: Vec<_> = exact
                .iter()
                .zip(&int4)
                .map(|(t, q)| {
                    let (w, q) = (decode_matrix(t).unwrap(), decode_matrix(q).unwrap());
                    let moved: Vec<f32> = w
                        .iter()
                        .zip(&q)
                        .map(|(w, q)| w + a as f32 * (q - w))
                        .collect();
                    encode_nearest(t.id, t.shape, &moved, DType::F32).unwrap()
                })
                .collect();
            let r = compare_tensors(&reference, &tensors, &seqs);
            println!(
                "{name:24} a {a:.2}: mean KL {:.2e} top-1 {:.4} (flips at reference margins <= {:.3})",
                r.model.mean_kl, r.model.top1_agreement, r.model.top1_flip_max_margin
            );
            points.push((a, r.model.mean_kl, r.model.top1_agreement));
        }
        let crossing = points.windows(2).find(|p| p[0].2 >= 0.97 && p[1].2 < 0.97);
        match crossing {
            Some(&[(a0, k0, t0), (a1, k1, t1)]) => {
                let f = (t0 - 0.97) / (t0 - t1);
                let (a, kl) = (a0 + f * (a1 - a0), k0 * (k1 / k0).powf(f));
                let at_one = points.last().unwrap().1;
                println!(
                    "{name:24} top-1 97% at a = {a:.3}, mean KL {kl:.2e} ({:.0}x below a = 1's {at_one:.2e})",
                    at_one / kl
                );
            }
            _ => println!("{name:24} top-1 does not cross 97% on the grid"),
        }
    }
}

/// How much of the int4 weights' error is the lookup tables' (`W_E`, `W_pos`, `pos_Q`, `pos_K`): they
/// are rounded first and their errors are per token or position, which no later matrix's
/// compensation (one linear map for every token) can undo. Each model with `f32` activations and the
/// default int4 weights: all of them, the tables alone, and every matrix but the tables (whose
/// compensation then undoes table errors that are not there: an upper figure).
fn int4_error_of_the_lookup_tables() {
    use microlens_host::quantize::tables::is_table;
    for (name, blob) in models() {
        let reference = Model::from_bytes(&blob).unwrap();
        let seqs = evaluation_sequences(reference.config());
        let (int4, exact) = int4_and_exact(&reference);
        let kl = |tables: bool, rest: bool| {
            let tensors: Vec<_> = exact
                .iter()
                .zip(&int4)
                .map(|(t, q)| match is_table(t.id.kind) {
                    true if tables => q.clone(),
                    false if rest => q.clone(),
                    _ => t.clone(),
                })
                .collect();
            compare_tensors(&reference, &tensors, &seqs).model.mean_kl
        };
        let (all, tables, rest) = (kl(true, true), kl(true, false), kl(false, true));
        println!(
            "{name:24} int4 weights: mean KL {all:.2e}; the tables alone {tables:.2e} ({:.0}%), \
             the rest alone {rest:.2e}",
            100.0 * tables / all
        );
    }
}

/// How far the int4 matrices' output errors are from what a better choice could reach. Per matrix read
/// through a calibration site, the output error power `sum_rows Δw H Δwᵀ` (`H = E[x xᵀ]` of the float
/// model's inputs on the calibration sequences; for a lookup table, the output moment it is rounded
/// against) of int4 GPTQ against those same inputs (plain GPTQ,
/// `--calibration-inputs float`, so that this power is what it minimises) and of nearest rounding,
/// against two floors:
/// - `lattice`: the same int4 grids, with the group scales GPTQ chose, and the best integers: a row's
///   candidates are the lattice `diag(s) Z^n` seen through `H^½`, whose mean squared distance to a
///   weight row (spread over many cells) is at least the sphere bound of its cell volume,
///   `prod_g s_g^32 * det(H)^½`. An input `H` never sees (LayerNorm's centred inputs never move along
///   `1`, a lattice vector when a row is one group) drops out: the bound is then taken in the other
///   `n - 1` dimensions, on the lattice projected along `1` (cell volume divided by `s √n`).
/// - `shannon`: any code of 4.5 bits per weight (4-bit values plus an `f16` scale per 32) for rows of
///   independent Gaussian weights (the fixtures' weights are drawn so; each input column's variance is
///   taken from the matrix), with `H` as the distortion measure: reverse water-filling.
///
/// A ratio is how many times its floor the error power is: at most how far that matrix's error could be
/// cut with int4 groups (`lattice`) or with any 4.5-bit format (`shannon`).
fn int4_error_against_its_floors() {
    use microlens::blob::I4_GROUP;
    use microlens::{Positional, TensorKind};
    use microlens_host::quantize::calibration::{record, InputPrecision, MatrixInput, Source};
    use microlens_host::quantize::compensation;
    use microlens_host::quantize::tables::{is_table, moment, moment_of};
    use microlens_host::quantize::{decode_matrix, CalibrationInputs};
    use nalgebra::{DMatrix, DVector};
    use std::collections::BTreeMap;
    const BITS_PER_WEIGHT: f64 = 4.0 + 16.0 / 32.0;
    for (name, blob) in models() {
        let reference = Model::from_bytes(&blob).unwrap();
        let seqs = Source::default().sequences(&reference).unwrap();
        let exact = nearest_tensors(&reference, DType::F32).unwrap();
        let gptq = compensation::compensated_tensors(
            &reference,
            DType::I4,
            Activations::I8,
            &seqs,
            CalibrationInputs::Float,
        )
        .unwrap();
        let near = nearest_tensors(&reference, DType::I4).unwrap();
        let sites: Vec<MatrixInput> = exact.iter().filter_map(|t| MatrixInput::of(t.id)).collect();
        let inputs = record(&reference, &seqs, InputPrecision::Float, &sites).unwrap();
        let values = |t: &microlens::blob::TensorData| -> Vec<f64> {
            decode_matrix(t)
                .unwrap()
                .into_iter()
                .map(f64::from)
                .collect()
        };
        // The shortformer's `W_pos` feeds only `pos_Q`/`pos_K`, which the forward pass reads instead.
        let shortformer = reference.config().positional == Positional::Shortformer;
        let mut moments = BTreeMap::new();
        let mut largest = (0.0f64, 0.0f64);
        for ((t, g), q) in exact.iter().zip(&gptq).zip(&near) {
            assert_eq!((t.id, t.id), (g.id, q.id));
            let [rows, n] = t.shape;
            let h = if let Some(site) = MatrixInput::of(t.id) {
                let x = &inputs[&site];
                let x = DMatrix::from_row_iterator(x.len() / n, n, x.iter().map(|&v| v as f64));
                x.transpose() * &x / x.nrows() as f64
            } else if is_table(t.id.kind) && !(shortformer && t.id.kind == TensorKind::WPos) {
                let of = moment_of(t.id);
                let h = moments
                    .entry((of.kind as u8, of.layer))
                    .or_insert_with(|| moment(&reference, t.id, &seqs).unwrap());
                DMatrix::from_row_slice(n, n, h)
            } else {
                continue;
            };
            let w = DMatrix::from_row_slice(rows, n, &values(t));
            let power = |values: Vec<f64>| {
                let d = &w - DMatrix::from_row_slice(rows, n, &values);
                (&d * &h * d.transpose()).trace()
            };
            let (pg, pn) = (power(values(g)), power(values(q)));
            let eig = h.symmetric_eigenvalues();
            let top = eig.max();
            // The tables' moments are finite differences: LayerNorm's null direction comes out near
            // 1e-8 of the largest eigenvalue (the next one near 1e-2), not at rounding level.
            let null = if is_table(t.id.kind) { 1e-6 } else { 1e-9 };
            let kept: Vec<f64> = eig.iter().copied().filter(|&v| v > null * top).collect();
            let groups = n.div_ceil(I4_GROUP);
            assert!(
                kept.len() == n || (kept.len() == n - 1 && groups == 1),
                "{name} {}",
                t.id
            );
            let ln_det_h: f64 = kept.iter().map(|v| v.ln()).sum();
            let lattice: f64 = g
                .scales
                .chunks(groups)
                .map(|s| {
                    let ln_s: f64 = s
                        .iter()
                        .enumerate()
                        .map(|(k, s)| (I4_GROUP.min(n - k * I4_GROUP) as f64) * (*s as f64).ln())
                        .sum();
                    let m = kept.len();
                    let ln_cell = if m == n {
                        ln_s
                    } else {
                        ln_s - (s[0] as f64).ln() - 0.5 * (n as f64).ln()
                    };
                    sphere_bound(m, ln_cell + 0.5 * ln_det_h)
                })
                .sum();
            let sd = DVector::from_fn(n, |j, _| {
                let c = w.column(j);
                (c.map(|v| (v - c.mean()).powi(2)).sum() / rows as f64).sqrt()
            });
            let scaled = DMatrix::from_fn(n, n, |i, j| sd[i] * h[(i, j)] * sd[j]);
            let eig: Vec<f64> = scaled
                .symmetric_eigenvalues()
                .iter()
                .map(|&v| v.max(0.0))
                .collect();
            let shannon = rows as f64 * water_filling(&eig, BITS_PER_WEIGHT * n as f64);
            let kind = format!("{:?}{}", t.id.kind, t.id.layer);
            println!(
                "{name:24} {kind:6} output error power: gptq {pg:.3e} (nearest {pn:.3e}); over the lattice floor \
                 gptq {:.2} nearest {:.2}; over the shannon floor gptq {:.2}",
                pg / lattice,
                pn / lattice,
                pg / shannon
            );
            largest = (largest.0.max(pg / lattice), largest.1.max(pg / shannon));
        }
        println!(
            "{name:24} largest gptq / floor: lattice {:.2}, shannon {:.2}",
            largest.0, largest.1
        );
    }
}

/// The default int4 weights of `reference` (rounded for `f32` activations) and its exact tensors, both
/// as `f32` tensors, for mixing the two.
fn int4_and_exact(reference: &Model<'_>) -> (Vec<TensorData>, Vec<TensorData>) {
    let rounding = Rounding::default_for(DType::I4);
    let int4 = requantize_blob(reference, DType::I4, Activations::F32, &rounding).unwrap();
    let int4 = nearest_tensors(&Model::from_bytes(&int4).unwrap(), DType::F32).unwrap();
    (int4, nearest_tensors(reference, DType::F32).unwrap())
}

/// Every model under test, or the one named after the command's name.
fn named_models() -> Vec<(&'static str, Vec<u8>)> {
    let only = std::env::args().nth(2);
    let mut all = models();
    all.retain(|(name, _)| only.as_deref().is_none_or(|o| o == *name));
    all
}

/// `reference` against itself with `tensors` (`f32` activations) on `seqs`.
fn compare_tensors(reference: &Model<'_>, tensors: &[TensorData], seqs: &[Vec<u32>]) -> Report {
    let cfg = reference.config();
    let blob =
        microlens::blob::write(cfg, *reference.processing(), Activations::F32, tensors).unwrap();
    compare(reference, &Model::from_bytes(&blob).unwrap(), seqs, || {}).unwrap()
}

/// Reverse water-filling: the least `sum_i min(θ, v_i)` over `θ` with `sum_i max(0, ½ log2(v_i / θ))`
/// equal to `bits`, the smallest mean squared error any code of `bits` bits reaches on independent
/// Gaussian components of variances `v` (Shannon's rate-distortion function).
fn water_filling(v: &[f64], bits: f64) -> f64 {
    let rate = |theta: f64| -> f64 {
        v.iter()
            .map(|&x| {
                if x > theta {
                    0.5 * (x / theta).log2()
                } else {
                    0.0
                }
            })
            .sum()
    };
    let (mut lo, mut hi) = (
        1e-300f64,
        v.iter().cloned().fold(f64::MIN_POSITIVE, f64::max),
    );
    for _ in 0..200 {
        let mid = (lo * hi).sqrt();
        if rate(mid) > bits {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    v.iter().map(|&x| x.min(hi)).sum()
}

/// `ln Γ(z)` for `z >= 10` (Stirling's series; error below 1e-9).
fn ln_gamma(z: f64) -> f64 {
    (z - 0.5) * z.ln() - z + 0.5 * (2.0 * std::f64::consts::PI).ln() + 1.0 / (12.0 * z)
        - 1.0 / (360.0 * z.powi(3))
}

/// The sphere bound: the mean squared distance from a point spread evenly over a lattice's cells to the
/// lattice, in `m` dimensions with `ln_det` the log of a cell's volume, is at least that of a ball of the
/// cell's volume, `m Γ(m/2 + 1)^(2/m) / ((m + 2) π) * det^(2/m)`.
fn sphere_bound(m: usize, ln_det: f64) -> f64 {
    let m = m as f64;
    let g = (2.0 / m * ln_gamma(m / 2.0 + 1.0)).exp() / ((m + 2.0) * std::f64::consts::PI);
    m * g * (2.0 / m * ln_det).exp()
}
