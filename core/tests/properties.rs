//! Properties over arbitrary inputs (proptest): a written blob reads back with its config and its values;
//! quantising a row and reading it back stays within half a step of every value.

mod common;

use common::encode_matrix;
use microlens::blob::{self, Activations, Processing, I4_GROUP, I8_GROUP};
use microlens::tensors::Catalogue;
use microlens::{ActFn, Config, DType, Model, Normalization, Positional};
use proptest::prelude::*;

fn config() -> impl Strategy<Value = Config> {
    let dims = (
        1usize..=3,
        1usize..=12,
        1usize..=3,
        1usize..=4,
        1usize..=20,
        1usize..=9,
    );
    let options = (
        prop::option::of(1usize..=16),
        0usize..7,
        0usize..5,
        0usize..3,
        any::<bool>(),
        1usize..=20,
        any::<bool>(),
    );
    (dims, options).prop_map(
        |(
            (layers, d_model, heads, half_head, vocab, n_ctx),
            (mlp, act, norm, pos, adj, out, inv),
        )| {
            let d_head = 2 * half_head;
            let mut cfg = Config::new(layers, d_model, heads, d_head, vocab, n_ctx, mlp);
            cfg.d_vocab_out = out;
            cfg.act_fn = ActFn::ALL[act];
            cfg.normalization = Normalization::ALL[norm];
            cfg.positional = match pos {
                0 => Positional::Standard,
                1 => Positional::Shortformer,
                _ => Positional::Rotary {
                    dim: d_head,
                    base: 10000.0,
                    adjacent_pairs: adj,
                },
            };
            cfg.scale_attn_by_inverse_layer_idx = inv;
            cfg
        },
    )
}

fn dtype() -> impl Strategy<Value = DType> {
    prop_oneof![
        Just(DType::F32),
        Just(DType::F16),
        Just(DType::I8),
        Just(DType::I4),
        Just(DType::I8G)
    ]
}

/// Values the encoders meet: mostly moderate, some zero rows, some tiny or large.
fn values(n: usize) -> impl Strategy<Value = Vec<f32>> {
    let scale = prop_oneof![Just(0.0f32), Just(1e-3), Just(1.0), Just(100.0)];
    (prop::collection::vec(-1.0f32..1.0, n), scale)
        .prop_map(|(v, s)| v.into_iter().map(|x| x * s).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Write then parse: the same config, the same processing and activations, every value back (f32).
    #[test]
    fn blob_write_parse_round_trip(cfg in config(), seed in any::<u64>(), i8_act in any::<bool>()) {
        let mut rng = common::Lcg(seed);
        let activations = if i8_act { Activations::I8 } else { Activations::F32 };
        let mut written = Vec::new();
        let tensors: Vec<_> = Catalogue::new(&cfg)
            .ids()
            .map(|id| {
                let [r, c] = id.shape(&cfg);
                let v: Vec<f32> = (0..r * c).map(|_| rng.uniform()).collect();
                written.push((id, v.clone()));
                encode_matrix(id, [r, c], &v, DType::F32)
            })
            .collect();
        let processing = Processing {
            fold_ln: seed & 1 == 1,
            center_writing_weights: seed & 2 == 2,
            center_unembed: seed & 4 == 4,
            fold_value_biases: seed & 8 == 8,
            original_normalization: cfg.normalization,
        };
        let bytes = blob::write(&cfg, processing, activations, &tensors).unwrap();
        let model = Model::from_bytes(&bytes).unwrap();
        prop_assert_eq!(model.config(), &cfg);
        prop_assert_eq!(model.processing(), &processing);
        prop_assert_eq!(model.activations(), activations);
        for (id, v) in written {
            let [rows, cols] = id.shape(&cfg);
            let read: Vec<f32> = if id.kind.is_matrix() {
                let m = model.matrix(id).unwrap();
                let mut out = vec![0.0; rows * cols];
                for (r, row) in out.chunks_mut(cols).enumerate() {
                    m.row_into(r, row);
                }
                out
            } else {
                model.vector(id).unwrap().iter().collect()
            };
            prop_assert_eq!(read, v, "{}", id);
        }
    }

    /// Quantise a row, read it back through the blob: every value within half a quantisation step (i8:
    /// `max|w| / 127` per row; i4: `max|w| / 7` per group of 32), f16 within its own rounding.
    #[test]
    fn quantise_dequantise_round_trip(
        dtype in dtype(),
        (rows, cols) in (1usize..=4, 1usize..=80),
        seed in any::<u64>(),
        v in values(320),
    ) {
        let cfg = {
            let mut c = Config::new(1, cols, 1, 2, rows, 4, None);
            c.normalization = Normalization::None;
            c
        };
        let w_e: Vec<f32> = v.iter().cycle().take(rows * cols).copied().collect();
        let mut rng = common::Lcg(seed);
        let tensors: Vec<_> = Catalogue::new(&cfg)
            .ids()
            .map(|id| {
                let [r, c] = id.shape(&cfg);
                let vals: Vec<f32> = if id.kind == microlens::TensorKind::WE {
                    w_e.clone()
                } else {
                    (0..r * c).map(|_| rng.uniform()).collect()
                };
                encode_matrix(id, [r, c], &vals, dtype)
            })
            .collect();
        let processing = Processing::none(cfg.normalization);
        let bytes = blob::write(&cfg, processing, Activations::F32, &tensors).unwrap();
        let model = Model::from_bytes(&bytes).unwrap();
        let m = model.matrix(microlens::TensorId::global(microlens::TensorKind::WE)).unwrap();
        let mut row = vec![0.0; cols];
        for (r, want) in w_e.chunks(cols).enumerate() {
            m.row_into(r, &mut row);
            for (g, (got, want)) in row.chunks(I4_GROUP).zip(want.chunks(I4_GROUP)).enumerate() {
                let max_row = want_row_max(w_e.chunks(cols).nth(r).unwrap());
                let max_group = want_row_max(want);
                let tol = match dtype {
                    DType::F32 => 0.0,
                    DType::F16 => max_row * 1e-3 + 1e-7,
                    // Half a step, the scale itself rounded to f16 (rel. 2^-11), and f32 rounding.
                    DType::I8 => max_row / 127.0 * 0.5 * (1.0 + 1e-2) + 1e-6,
                    DType::I4 => max_group / 7.0 * 0.5 * (1.0 + 1e-2) + 1e-6,
                    // Each value's own group of 8: checked below.
                    DType::I8G => f32::INFINITY,
                };
                for (k, (a, b)) in got.iter().zip(want).enumerate() {
                    let tol = match dtype {
                        DType::I8G => {
                            let c = g * I4_GROUP + k;
                            let row = &w_e[r * cols..(r + 1) * cols];
                            let group = &row[c / I8_GROUP * I8_GROUP..((c / I8_GROUP + 1) * I8_GROUP).min(cols)];
                            want_row_max(group) / 127.0 * 0.5 * (1.0 + 1e-2) + 1e-6
                        }
                        _ => tol,
                    };
                    prop_assert!((a - b).abs() <= tol, "row {r} group {g}: {a} vs {b} (tol {tol}, {dtype:?})");
                }
            }
        }
    }
}

fn want_row_max(v: &[f32]) -> f32 {
    v.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}
