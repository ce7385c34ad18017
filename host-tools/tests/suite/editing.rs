//! Causal tracing and memory editing on the shipped fact model (`firmware-example/model/facts-4l.*`,
//! made by `microlens train-facts`): what tracing finds, and ROME/MEMIT edits measured through the core
//! forward, in f32 and after quantisation.

use std::path::PathBuf;

use microlens::{DType, HookKind, Model};
use microlens_host::analysis::tracing::{causal_trace, TraceOptions};
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::edit::keys::random_sequences;
use microlens_host::edit::measure::{mean_kl, recall, survival};
use microlens_host::edit::update::{memit, rome, EditOptions, Request};
use microlens_host::edit::value::ValueOptions;
use microlens_host::import::layout::tl_tensor;
use microlens_host::train::facts::{read_facts_file, PromptTarget};

fn shipped(ext: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../firmware-example/model/facts-4l.{ext}"))
}

fn blob() -> Vec<u8> {
    let opts = ConvertOptions {
        config: Some(shipped("json")),
        ..ConvertOptions::default()
    };
    convert(&shipped("safetensors"), &opts).unwrap().blob
}

fn facts() -> Vec<PromptTarget> {
    read_facts_file(&shipped("facts")).unwrap()
}

fn options(model: &Model<'_>) -> EditOptions {
    let cfg = model.config();
    EditOptions {
        calibration: random_sequences(1000, cfg.n_ctx, cfg.d_vocab, 0),
        ridge: 0.01,
        lambda: 10.0,
        value: ValueOptions::default(),
    }
}

/// Prompts of every fact whose subject differs from the edited ones'.
fn unrelated(facts: &[PromptTarget], edited: &[PromptTarget]) -> Vec<Vec<u32>> {
    facts
        .iter()
        .filter(|f| !edited.iter().any(|e| e.prompt[..2] == f.prompt[..2]))
        .map(|f| f.prompt.clone())
        .collect()
}

#[test]
fn the_shipped_fact_model_recalls_its_facts() {
    let bytes = blob();
    let model = Model::from_bytes(&bytes).unwrap();
    let facts = facts();
    assert_eq!(facts.len(), 256);
    let recalled = microlens_host::train::facts::recall(&model, &facts).unwrap();
    assert!(recalled >= 0.99, "{recalled}");
}

/// The fact model recalls at the relation token: averaged over every 8th fact, restoring the last
/// position's MLP output of the last layer brings back the most of the answer (more than half of it),
/// MLP outputs at the subject tokens little; the subject reaches the last position through layer 1's
/// attention (restoring the residual stream there after layer 1 restores most, after layer 0 little).
#[test]
fn tracing_finds_the_facts_recalled_by_the_last_tokens_late_mlps() {
    let bytes = blob();
    let model = Model::from_bytes(&bytes).unwrap();
    let facts = facts();
    let sample: Vec<_> = facts.iter().step_by(8).collect();
    let (mut mlp, mut resid) = (vec![vec![0.0; 3]; 4], vec![vec![0.0; 3]; 4]);
    let mut corrupted = 0.0;
    for f in &sample {
        let opts = TraceOptions {
            subject: 0..2,
            noise: None,
            samples: 10,
            seed: 0,
        };
        let t = causal_trace(&model, &f.prompt, &opts).unwrap();
        assert_eq!(t.answer, f.target);
        corrupted += t.corrupted / sample.len() as f64;
        for (acc, kind) in [
            (&mut mlp, HookKind::MlpOut),
            (&mut resid, HookKind::ResidPost),
        ] {
            for (l, row) in t.indirect_effect(kind).iter().enumerate() {
                for (p, x) in row.iter().enumerate() {
                    acc[l][p] += x / sample.len() as f64;
                }
            }
        }
    }
    assert!(corrupted < 0.2, "the noise leaves p = {corrupted}");
    let last_mlp = mlp[3][2];
    assert!(last_mlp > 0.5, "{mlp:?}");
    for (l, row) in mlp.iter().enumerate() {
        for (p, &x) in row.iter().enumerate() {
            assert!((l, p) == (3, 2) || x < last_mlp, "{mlp:?}");
            if p < 2 {
                assert!(x < 0.1, "subject MLP effect {x} at layer {l}: {mlp:?}");
            }
        }
    }
    assert!(resid[1][2] > 0.5 && resid[0][2] < 0.3, "{resid:?}");
}

#[test]
fn a_rome_edit_makes_the_target_win_keeps_other_facts_and_survives_int8() {
    let bytes = blob();
    let model = Model::from_bytes(&bytes).unwrap();
    let facts = facts();
    let old = &facts[1]; // 2,21,33 -> 44
    let new = PromptTarget {
        prompt: old.prompt.clone(),
        target: (old.target + 7 - 36) % 28 + 36,
    };
    assert!(!recall(&model, &new).unwrap().top1);
    let req = Request {
        fact: new.clone(),
        subject_last: 1,
    };
    let edited = rome(&model, &req, 1, &options(&model)).unwrap();
    let after = Model::from_bytes(&edited.blob).unwrap();
    assert!(recall(&after, &new).unwrap().top1);
    let unrelated = unrelated(&facts, std::slice::from_ref(&new));
    let kl = mean_kl(&model, &after, &unrelated).unwrap();
    assert!(kl <= 0.05, "unrelated KL {kl}");
    let others = microlens_host::train::facts::recall(
        &after,
        &facts
            .iter()
            .filter(|f| unrelated.contains(&f.prompt))
            .cloned()
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert!(others >= 0.99, "{others}");
    let s = survival(&model, &after, &[new], &unrelated, &[DType::I8], false).unwrap();
    assert!(s[0].targets[0].top1, "{s:?}");
}

#[test]
fn memit_writes_several_facts_over_layers() {
    let bytes = blob();
    let model = Model::from_bytes(&bytes).unwrap();
    let facts = facts();
    let news: Vec<PromptTarget> = [1, 40, 150]
        .iter()
        .map(|&i| PromptTarget {
            prompt: facts[i].prompt.clone(),
            target: (facts[i].target + 11 - 36) % 28 + 36,
        })
        .collect();
    let reqs: Vec<Request> = news
        .iter()
        .map(|f| Request {
            fact: f.clone(),
            subject_last: 1,
        })
        .collect();
    let edited = memit(&model, &reqs, &[0, 1], &options(&model)).unwrap();
    let after = Model::from_bytes(&edited.blob).unwrap();
    for f in &news {
        assert!(recall(&after, f).unwrap().top1, "{f:?}");
    }
    let kl = mean_kl(&model, &after, &unrelated(&facts, &news)).unwrap();
    assert!(kl <= 0.05, "unrelated KL {kl}");
}

/// The edited blob is the original with only the edited layer's `W_out` changed, and that one still in
/// the folded form `convert` writes for LayerNorm models (every row centred over `d_model`).
#[test]
fn an_edit_changes_only_w_out_of_its_layer_and_keeps_it_centred() {
    let bytes = blob();
    let model = Model::from_bytes(&bytes).unwrap();
    assert!(model.processing().center_writing_weights);
    let req = Request {
        fact: PromptTarget {
            prompt: vec![2, 21, 33],
            target: 40,
        },
        subject_last: 1,
    };
    let edited = rome(&model, &req, 1, &options(&model)).unwrap();
    let after = Model::from_bytes(&edited.blob).unwrap();
    for id in microlens::tensors::Catalogue::new(model.config()).ids() {
        let (a, b) = (
            tl_tensor(&model, id).unwrap(),
            tl_tensor(&after, id).unwrap(),
        );
        let changed = a.data != b.data;
        let edited_one = id.kind == microlens::TensorKind::WOut && id.layer == 1;
        assert_eq!(changed, edited_one, "{id}");
        if edited_one {
            let d_model = model.config().d_model;
            for row in b.data.chunks_exact(d_model) {
                let mean = row.iter().map(|&x| x as f64).sum::<f64>() / d_model as f64;
                assert!(mean.abs() < 1e-5, "row mean {mean}");
            }
        }
    }
}
