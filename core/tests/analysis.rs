//! The ready-made analysis hooks against plain recomputations from recorded activations.

mod common;

use common::{random_blob, run, small_config};
use microlens::analysis::{
    DirectLogitAttribution, Head, HeadAblation, HeadDetector, HeadMeans, HeadPattern,
    PatternRecorder, Ratio,
};
use microlens::blob::{self, Activations, TensorData};
use microlens::tensors::{Catalogue, TensorId};
use microlens::{
    Config, DType, HookKind, HookKinds, HookPoint, Hooks, Model, Normalization, Session, TensorKind,
};

/// Every tensor of an `f32` model, editable, in blob layout.
fn tensors_of(model: &Model<'_>) -> Vec<(TensorId, Vec<f32>)> {
    let cfg = model.config();
    Catalogue::new(cfg)
        .ids()
        .map(|id| {
            let [rows, cols] = id.shape(cfg);
            let mut v = vec![0.0; rows * cols];
            if id.kind.is_matrix() {
                let m = model.matrix(id).unwrap();
                v.chunks_exact_mut(cols)
                    .enumerate()
                    .for_each(|(r, row)| m.row_into(r, row));
            } else {
                v = model.vector(id).unwrap().iter().collect();
            }
            (id, v)
        })
        .collect()
}

fn blob_of(model: &Model<'_>, tensors: &[(TensorId, Vec<f32>)]) -> Vec<u8> {
    let cfg = model.config();
    let data: Vec<TensorData> = tensors
        .iter()
        .map(|(id, v)| TensorData {
            id: *id,
            dtype: DType::F32,
            shape: id.shape(cfg),
            data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            scales: vec![],
        })
        .collect();
    blob::write(cfg, *model.processing(), Activations::F32, &data).unwrap()
}

const TOKENS: [u32; 11] = [3, 7, 1, 9, 3, 7, 1, 9, 3, 7, 2];

#[test]
fn zero_ablation_equals_zeroed_w_o_rows() {
    let bytes = random_blob(&small_config(), 11);
    let model = Model::from_bytes(&bytes).unwrap();
    let cfg = *model.config();
    for head in [Head::new(0, 1), Head::new(1, 0)] {
        let mut t = tensors_of(&model);
        let (_, w_o) = t
            .iter_mut()
            .find(|(id, _)| *id == TensorId::layer(TensorKind::WO, head.layer))
            .unwrap();
        // Blob W_O is [d_model, n_heads * d_head]: head h owns columns h*d_head.. (TL's W_O[h] rows).
        for row in w_o.chunks_exact_mut(cfg.d_attn()) {
            row[head.head * cfg.d_head..(head.head + 1) * cfg.d_head].fill(0.0);
        }
        let without = blob_of(&model, &t);
        let expected = run(&Model::from_bytes(&without).unwrap(), &TOKENS, &mut ());
        let heads = [head];
        let ablated = run(&model, &TOKENS, &mut HeadAblation::zero(&heads));
        assert_eq!(ablated, expected, "{head}");
        assert_ne!(ablated, run(&model, &TOKENS, &mut ()));
    }
}

#[test]
fn mean_ablation_with_a_heads_own_mean_changes_nothing() {
    let bytes = random_blob(&small_config(), 12);
    let model = Model::from_bytes(&bytes).unwrap();
    let cfg = *model.config();
    let mut buf = vec![0.0; HeadMeans::len(cfg.n_layers, cfg.n_heads, cfg.d_head)];
    let mut means = HeadMeans::new(&mut buf, cfg.n_heads);
    // One position: the mean of hook_z is hook_z itself.
    let clean = run(&model, &TOKENS[..1], &mut means);
    assert_eq!(means.count(), 1);
    let means = means.finish();
    let heads = [Head::new(0, 0), Head::new(1, 1)];
    let ablated = run(
        &model,
        &TOKENS[..1],
        &mut HeadAblation::mean(&heads, means, cfg.n_heads),
    );
    assert_eq!(ablated, clean);
    // Over more positions it is a real intervention.
    let longer = run(
        &model,
        &TOKENS,
        &mut HeadAblation::mean(&heads, means, cfg.n_heads),
    );
    assert_ne!(longer, run(&model, &TOKENS, &mut ()));
}

/// Every pattern row, `[layer][head][query]`.
#[derive(Default)]
struct Rows(Vec<((usize, usize, usize), Vec<f32>)>);

impl Hooks for Rows {
    fn wants(&self, kind: HookKind) -> bool {
        HookKinds::of(&[HookKind::Pattern]).contains(kind)
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        self.0.push(((p.layer, p.head, p.pos), act.to_vec()));
    }
}

#[test]
fn pattern_recorder_and_detectors_match_the_recorded_rows() {
    let bytes = random_blob(&small_config(), 13);
    let model = Model::from_bytes(&bytes).unwrap();
    let cfg = *model.config();
    let mut rows = Rows::default();
    run(&model, &TOKENS, &mut rows);

    // Layer 1 only, first 8 positions.
    let mut buf = vec![0.0; PatternRecorder::len(1, cfg.n_heads, 8)];
    let mut rec = PatternRecorder::new(&mut buf, 1, 1, cfg.n_heads, 8).unwrap();
    let mut acc: Vec<Vec<Ratio>> = vec![vec![Ratio::default(); 4]; 5];
    let [a0, a1, a2, a3, a4] = &mut acc[..] else {
        unreachable!()
    };
    let mut det = (
        HeadDetector::new(HeadPattern::PreviousToken, &TOKENS, a0, cfg.n_heads),
        (
            HeadDetector::new(HeadPattern::DuplicateToken, &TOKENS, a1, cfg.n_heads),
            (
                HeadDetector::new(HeadPattern::Induction, &TOKENS, a2, cfg.n_heads),
                (
                    HeadDetector::new(HeadPattern::Induction, &TOKENS, a3, cfg.n_heads)
                        .exclude_bos(true)
                        .exclude_current_token(true),
                    HeadDetector::new(HeadPattern::Induction, &TOKENS, a4, cfg.n_heads)
                        .targeted_rows_only(true),
                ),
            ),
        ),
    );
    run(&model, &TOKENS, &mut (&mut rec, &mut det));

    for ((layer, head, q), row) in &rows.0 {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        for k in 0..8 {
            let want = if *layer == 1 && *q < 8 {
                row.get(k).copied().unwrap_or(0.0)
            } else {
                0.0
            };
            assert_eq!(rec.get(*layer, *head, *q, k), want);
        }
    }
    // score = sum(A ⊙ D) / sum(A), recomputed from the rows (only rows with a target when `targeted`).
    let (p, (d, (i, (i_ex, i_rep)))) = &det;
    for (detector, pattern, exclude, targeted) in [
        (p, HeadPattern::PreviousToken, false, false),
        (d, HeadPattern::DuplicateToken, false, false),
        (i, HeadPattern::Induction, false, false),
        (i_ex, HeadPattern::Induction, true, false),
        (i_rep, HeadPattern::Induction, false, true),
    ] {
        for layer in 0..cfg.n_layers {
            for head in 0..cfg.n_heads {
                let (mut num, mut den) = (0.0f64, 0.0f64);
                for ((l, h, q), row) in &rows.0 {
                    let has_target = (0..row.len()).any(|k| pattern.target(&TOKENS, *q, k));
                    if (*l, *h) != (layer, head) || (targeted && !has_target) {
                        continue;
                    }
                    for (k, &a) in row.iter().enumerate() {
                        if exclude && (k == 0 || k == *q) {
                            continue;
                        }
                        den += a as f64;
                        if pattern.target(&TOKENS, *q, k) {
                            num += a as f64;
                        }
                    }
                }
                let got = detector.score(Head::new(layer, head)) as f64;
                assert!(
                    (got - num / den).abs() < 1e-5,
                    "{pattern:?} L{layer}H{head}"
                );
            }
        }
    }
}

#[test]
fn detection_patterns_follow_transformer_lens() {
    let t = [5, 1, 5, 1, 2];
    let d = |p: HeadPattern| -> Vec<(usize, usize)> {
        (0..t.len())
            .flat_map(|q| (0..t.len()).map(move |k| (q, k)))
            .filter(|&(q, k)| p.target(&t, q, k))
            .collect()
    };
    assert_eq!(
        d(HeadPattern::PreviousToken),
        [(1, 0), (2, 1), (3, 2), (4, 3)]
    );
    assert_eq!(d(HeadPattern::DuplicateToken), [(2, 0), (3, 1)]);
    // tok[k-1] == tok[q]: query 2 (token 5) attends to key 1 (after the earlier 5); query 3 to key 2.
    assert_eq!(d(HeadPattern::Induction), [(2, 1), (3, 2)]);
}

/// Records what the DLA identity needs: the residual before layer 0 and ln_final's scale.
#[derive(Default)]
struct Parts {
    embed: Vec<f32>,
    scale: f32,
}

impl Hooks for Parts {
    fn wants(&self, kind: HookKind) -> bool {
        matches!(kind, HookKind::ResidPre | HookKind::LnFinalScale)
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        match p.kind {
            HookKind::ResidPre if p.layer == 0 => self.embed = act.to_vec(),
            HookKind::LnFinalScale => self.scale = act[0],
            _ => {}
        }
    }
}

#[test]
fn direct_logit_attribution_completes_to_the_logit() {
    // Attention-only LN model: resid_final = embed + pos + sum over layers of (sum_h result_h + b_O).
    for normalization in [Normalization::LN, Normalization::RMS] {
        let cfg = Config {
            normalization,
            ..Config::new(2, 16, 3, 4, 19, 12, None)
        };
        let bytes = random_blob(&cfg, 14);
        let model = Model::from_bytes(&bytes).unwrap();
        let (answer, wrong) = (5, 2);
        let t = tensors_of(&model);
        let get = |kind, layer| {
            t.iter()
                .find(|(id, _)| id.kind == kind && id.layer == layer)
                .map(|(_, v)| v.clone())
        };
        let w_u = get(TensorKind::WU, 0).unwrap();
        let lnf_w = get(TensorKind::LnFinalW, 0).unwrap();
        let lnf_b = get(TensorKind::LnFinalB, 0).unwrap_or(vec![0.0; 16]);
        let b_u = get(TensorKind::BU, 0).unwrap();
        let u: Vec<f32> = (0..16)
            .map(|i| (w_u[answer * 16 + i] - w_u[wrong * 16 + i]) * lnf_w[i])
            .collect();
        let centre = |x: &[f32]| -> Vec<f32> {
            let m = if normalization == Normalization::LN {
                x.iter().sum::<f32>() / x.len() as f32
            } else {
                0.0
            };
            x.iter().map(|v| v - m).collect()
        };
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(a, b)| a * b).sum::<f32>();

        let (mut dir, mut out) = (vec![0.0; 16], vec![0.0; 6]);
        let mut dla =
            DirectLogitAttribution::logit_diff(&model, answer, wrong, &mut dir, &mut out).unwrap();
        let mut parts = Parts::default();
        let (mut kv, mut ws) = (
            vec![0.0; model.kv_cache_len()],
            vec![0.0; model.workspace_len()],
        );
        let mut s = Session::new(&model, &mut kv, &mut ws).unwrap();
        for &tok in &TOKENS {
            let logits = s.step_with(tok, &mut (&mut dla, &mut parts)).unwrap();
            let mut rest = parts.embed.clone();
            for layer in 0..2 {
                let b_o = get(TensorKind::BO, layer).unwrap();
                rest.iter_mut().zip(&b_o).for_each(|(r, b)| *r += b);
            }
            let bias: Vec<f32> = (0..16)
                .map(|i| lnf_b[i] * (w_u[answer * 16 + i] - w_u[wrong * 16 + i]))
                .collect();
            let total = dla.values().iter().sum::<f32>()
                + dot(&centre(&rest), &u) / parts.scale
                + bias.iter().sum::<f32>()
                + b_u[answer]
                - b_u[wrong];
            let want = logits[answer] - logits[wrong];
            assert!(
                (total - want).abs() < 1e-4 * (1.0 + want.abs()),
                "{normalization:?}: {total} vs {want}"
            );
        }
        assert!(DirectLogitAttribution::token(&model, 19, &mut dir, &mut out).is_none());
    }
}

#[test]
fn hook_kinds_cover_every_kind_once() {
    for (i, k) in HookKind::ALL.iter().enumerate() {
        assert_eq!(*k as usize, i);
        assert!(HookKinds::ALL.contains(*k));
        assert!(!HookKinds::NONE.contains(*k));
        assert!(HookKinds::NONE.with(*k).contains(*k));
    }
}
