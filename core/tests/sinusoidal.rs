//! Sinusoidal positions: the formula within an `f32` ulp of an `f64` reference, added to the residual
//! stream exactly as a learned `W_pos` holding the same values, and no tensor in the blob.

mod common;

use common::{encode_matrix, run, Lcg};
use microlens::blob::{self, Activations, Processing, TensorData};
use microlens::tensors::Catalogue;
use microlens::{
    sinusoidal, Config, DType, HookKind, HookPoint, Hooks, Model, Positional, TensorKind,
};

/// `|a - b|` in units of the `f32` spacing at `b`.
fn ulps(a: f32, b: f64) -> f64 {
    let b32 = b as f32;
    let spacing = (f32::from_bits(b32.abs().to_bits() + 1) - b32.abs()) as f64;
    (a as f64 - b).abs() / spacing.max(f32::MIN_POSITIVE as f64)
}

#[test]
fn matches_the_formula_in_f64_within_an_ulp() {
    for d_model in [1, 2, 7, 16, 64, 129] {
        let mut row = vec![0.0f32; d_model];
        for pos in (0..70).chain([255, 1000, 4095, 65_535]) {
            sinusoidal(pos, &mut row);
            for (j, &x) in row.iter().enumerate() {
                let i = (j / 2) as f64;
                let angle = pos as f64 / 10000f64.powf(2.0 * i / d_model as f64);
                let exact = if j % 2 == 0 { angle.sin() } else { angle.cos() };
                let err = ulps(x, exact);
                // Near a zero of sin or cos the f32 spacing is tiny: compare absolutely there.
                assert!(
                    err <= 1.0 || (x as f64 - exact).abs() < 1e-12,
                    "d_model {d_model} pos {pos} dim {j}: {x} vs {exact} ({err} ulp)"
                );
            }
        }
    }
    let mut row = [0.0f32; 4];
    sinusoidal(0, &mut row);
    assert_eq!(row, [0.0, 1.0, 0.0, 1.0]);
}

/// A blob of `cfg` whose tensors are drawn in the order of `draw_cfg`'s catalogue (so a standard and a
/// sinusoidal config share every weight but `W_pos`), `W_pos` being the sinusoidal table.
fn blob_sharing_weights(cfg: &Config, draw_cfg: &Config, seed: u64) -> Vec<u8> {
    let mut rng = Lcg(seed);
    let mut tensors: Vec<TensorData> = Vec::new();
    for id in Catalogue::new(draw_cfg).ids() {
        let shape = id.shape(draw_cfg);
        let mut values: Vec<f32> = (0..shape[0] * shape[1]).map(|_| rng.uniform()).collect();
        if id.kind == TensorKind::WPos {
            for (pos, row) in values.chunks_mut(shape[1]).enumerate() {
                sinusoidal(pos, row);
            }
        }
        if id.kind.present(cfg) {
            tensors.push(encode_matrix(id, shape, &values, DType::F32));
        }
    }
    let processing = Processing::none(cfg.normalization);
    blob::write(cfg, processing, Activations::F32, &tensors).unwrap()
}

/// Records `hook_pos_embed`.
struct PosEmbed(Vec<Vec<f32>>);

impl Hooks for PosEmbed {
    fn hook(&mut self, point: HookPoint, act: &mut [f32]) {
        if point.kind == HookKind::PosEmbed {
            self.0.push(act.to_vec());
        }
    }
}

#[test]
fn equals_a_learned_table_of_the_same_values_and_has_no_tensor() {
    let standard = Config::new(2, 10, 2, 5, 13, 9, Some(16));
    let sin = Config {
        positional: Positional::Sinusoidal,
        ..standard
    };
    let (a, b) = (
        blob_sharing_weights(&standard, &standard, 3),
        blob_sharing_weights(&sin, &standard, 3),
    );
    let (a, b) = (
        Model::from_bytes(&a).unwrap(),
        Model::from_bytes(&b).unwrap(),
    );
    assert_eq!(b.n_tensors() + 1, a.n_tensors());
    assert!(a.blob_len() - b.blob_len() >= 9 * 10 * 4);
    assert!(b.features().names().contains(&"sinusoidal"));
    let tokens = [1, 12, 0, 5, 5, 7, 3, 2, 9];
    let (mut ha, mut hb) = (PosEmbed(vec![]), PosEmbed(vec![]));
    let (la, lb) = (run(&a, &tokens, &mut ha), run(&b, &tokens, &mut hb));
    let bits = |l: &Vec<Vec<f32>>| l.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&la), bits(&lb));
    assert_eq!(ha.0, hb.0);
    // And it matters: without positions the logits differ.
    let none = run(&b, &[1, 1, 1], &mut ());
    assert_ne!(none[0], none[2]);
}
