//! Tests of the whole training path: learning, determinism, export format, TransformerLens equivalence.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use anyhow::Result;
use candle_core::{Device, Tensor};
use serde_json::Value;

use super::data::{InductionData, TrainData};
use super::eval::{best_copier, evaluate};
use super::export::{export, load};
use super::sequence::Sequence;
use microlens::{Normalization, Positional};

use super::model::{values, Model, ModelConfig};
use super::trainer::{rng, train, TrainConfig};

fn small(n_layers: usize, positional: Positional, norm: Normalization) -> ModelConfig {
    ModelConfig {
        n_layers,
        d_model: 32,
        n_heads: 2,
        d_head: 16,
        d_vocab: 16,
        n_ctx: 16,
        positional,
        norm,
        eps: 1e-5,
    }
}

fn config(model: ModelConfig, steps: usize, seed: u64) -> TrainConfig {
    TrainConfig {
        model,
        data: TrainData::Distinct,
        steps,
        lr: 1e-2,
        batch: 64,
        weight_decay: 0.01,
        warmup: 20,
        final_lr_frac: 0.1,
        seed,
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// A fresh empty directory under the system temp dir.
fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("microlens-train-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Held-out sequences of the small configuration and the best fixed-distance copier's accuracy on them.
fn small_eval_set() -> (Vec<Sequence>, f64) {
    let data = InductionData::new(16, 16).unwrap();
    let eval_set = data.sample_many(&mut rng(1234, 0), 512);
    let (_, copier) = best_copier(&eval_set, 8);
    (eval_set, copier)
}

#[test]
fn short_run_learns_induction_and_beats_a_fixed_distance_copier() -> Result<()> {
    let cfg = config(small(2, Positional::Standard, Normalization::None), 400, 0);
    let mut first = None;
    let trained = train(&cfg, |r| {
        first.get_or_insert(r.loss_repeated);
    })?;
    let (eval_set, copier) = small_eval_set();
    let m = evaluate(&trained.model, &eval_set)?;
    let first = first.unwrap();
    println!(
        "2 layers: accuracy {:.3}, copier {copier:.3}",
        m.acc_repeated
    );
    assert!(
        first > 2.5,
        "initial repeated-part loss {first} should be near ln 16"
    );
    assert!(
        m.loss_repeated < first - 1.5,
        "repeated-part loss {} did not fall from {first}",
        m.loss_repeated
    );
    assert!(
        copier < 0.4,
        "the data must defeat a fixed-distance copier (got {copier})"
    );
    assert!(
        m.acc_repeated > copier + 0.3,
        "accuracy {} vs copier {copier}",
        m.acc_repeated
    );
    Ok(())
}

/// The control: one attention layer, trained the same way, cannot compose a previous-token head with an
/// induction head and stays near the fixed-distance copier.
#[test]
fn one_layer_control_fails_to_learn_induction() -> Result<()> {
    let cfg = config(small(1, Positional::Standard, Normalization::None), 400, 0);
    let trained = train(&cfg, |_| {})?;
    let (eval_set, copier) = small_eval_set();
    let m = evaluate(&trained.model, &eval_set)?;
    println!(
        "1 layer: accuracy {:.3}, copier {copier:.3}",
        m.acc_repeated
    );
    assert!(
        m.acc_repeated < copier + 0.15,
        "a 1-layer model reached {} (copier {copier})",
        m.acc_repeated
    );
    Ok(())
}

#[test]
fn same_seed_gives_identical_weights() -> Result<()> {
    let weights = |seed| -> Result<Vec<(String, Vec<f32>)>> {
        let t = train(
            &config(small(2, Positional::Standard, Normalization::LN), 5, seed),
            |_| {},
        )?;
        t.model
            .named_vars()
            .into_iter()
            .map(|(n, v)| Ok((n, values(v)?)))
            .collect()
    };
    let a = weights(7)?;
    assert_eq!(a, weights(7)?);
    assert_ne!(a, weights(8)?);
    Ok(())
}

#[test]
fn export_writes_transformerlens_names_shapes_and_config_keys() -> Result<()> {
    // Every key TransformerLens 2.x's `cfg.to_dict()` writes (a real dump from the fixtures).
    let tl_dump: Value = serde_json::from_str(&std::fs::read_to_string(
        fixtures().join("attn_only_2l/config.json"),
    )?)?;
    let tl_keys: BTreeSet<&str> = tl_dump
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for norm in [Normalization::None, Normalization::LN] {
        let cfg = ModelConfig {
            d_model: 24,
            n_heads: 3,
            d_head: 8,
            d_vocab: 11,
            n_ctx: 9,
            ..small(2, Positional::Standard, norm)
        };
        let model = Model::new(cfg, &mut rng(0, 0))?;
        let dir = scratch_dir("export");
        let out = export(&model, &dir, "m", 5)?;

        let bytes = std::fs::read(&out.weights)?;
        let st = safetensors::SafeTensors::deserialize(&bytes)?;
        let got: HashMap<String, Vec<usize>> = st
            .tensors()
            .into_iter()
            .map(|(n, v)| (n, v.shape().to_vec()))
            .collect();
        let mut want: HashMap<String, Vec<usize>> = HashMap::from([
            ("embed.W_E".into(), vec![11, 24]),
            ("pos_embed.W_pos".into(), vec![9, 24]),
            ("unembed.W_U".into(), vec![24, 11]),
            ("unembed.b_U".into(), vec![11]),
        ]);
        for l in 0..2 {
            for w in ["W_Q", "W_K", "W_V"] {
                want.insert(format!("blocks.{l}.attn.{w}"), vec![3, 24, 8]);
            }
            for b in ["b_Q", "b_K", "b_V"] {
                want.insert(format!("blocks.{l}.attn.{b}"), vec![3, 8]);
            }
            want.insert(format!("blocks.{l}.attn.W_O"), vec![3, 8, 24]);
            want.insert(format!("blocks.{l}.attn.b_O"), vec![24]);
            if norm == Normalization::LN {
                want.insert(format!("blocks.{l}.ln1.w"), vec![24]);
                want.insert(format!("blocks.{l}.ln1.b"), vec![24]);
            }
        }
        if norm == Normalization::LN {
            want.insert("ln_final.w".into(), vec![24]);
            want.insert("ln_final.b".into(), vec![24]);
        }
        assert_eq!(got, want);
        assert!(st
            .tensors()
            .iter()
            .all(|(_, v)| v.dtype() == safetensors::Dtype::F32));

        let json: Value = serde_json::from_str(&std::fs::read_to_string(&out.config)?)?;
        let obj = json.as_object().unwrap();
        for k in obj.keys() {
            assert!(
                tl_keys.contains(k.as_str()),
                "`{k}` is not a HookedTransformerConfig field"
            );
        }
        let expect = [
            ("n_layers", Value::from(2)),
            ("d_model", 24.into()),
            ("n_ctx", 9.into()),
            ("d_head", 8.into()),
            ("n_heads", 3.into()),
            ("d_vocab", 11.into()),
            ("d_vocab_out", 11.into()),
            ("attn_only", true.into()),
            ("d_mlp", Value::Null),
            ("act_fn", Value::Null),
            ("tokenizer_name", Value::Null),
            ("positional_embedding_type", "standard".into()),
            ("use_attn_scale", true.into()),
            ("attn_scale", 8f64.sqrt().into()),
            ("eps", 1e-5.into()),
            ("seed", 5.into()),
            (
                "normalization_type",
                if norm == Normalization::LN {
                    "LN".into()
                } else {
                    Value::Null
                },
            ),
        ];
        for (k, v) in expect {
            assert_eq!(obj.get(k), Some(&v), "config key {k}");
        }

        // Reading the files back gives the same model.
        let back = load(&out.weights, &out.config)?;
        assert_eq!(back.cfg, cfg);
        for ((n, a), (_, b)) in model.named_vars().into_iter().zip(back.named_vars()) {
            assert_eq!(values(a)?, values(b)?, "{n}");
        }
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// The candle forward pass reproduces TransformerLens 2.x on its golden fixtures (LN, standard and
/// shortformer positions): log-probabilities, attention patterns and loss.
#[test]
fn forward_matches_transformerlens_fixtures() -> Result<()> {
    for name in ["attn_only_2l", "shortformer"] {
        let dir = fixtures().join(name);
        let model = load(&dir.join("model.safetensors"), &dir.join("config.json"))?;
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json"))?)?;
        for (case, loss) in expected["cases"]
            .as_array()
            .unwrap()
            .iter()
            .zip(expected["loss"].as_array().unwrap())
        {
            let tokens: Vec<u32> = serde_json::from_value(case["tokens"].clone())?;
            let t = tokens.len();
            let fwd = model.forward(&Tensor::from_vec(tokens.clone(), (1, t), &Device::Cpu)?)?;
            let logp = candle_nn::ops::log_softmax(&fwd.logits.squeeze(0)?, 1)?.to_vec2::<f32>()?;
            let want: Vec<Vec<f32>> = serde_json::from_value(case["log_probs"].clone())?;
            assert_close(logp.iter().flatten(), want.iter().flatten(), 1e-4, name);
            for (l, pattern) in fwd.patterns.iter().enumerate() {
                let got = pattern.squeeze(0)?.flatten_all()?.to_vec1::<f32>()?;
                let want: Vec<Vec<Vec<f32>>> = serde_json::from_value(case["patterns"][l].clone())?;
                assert_close(got.iter(), want.iter().flatten().flatten(), 1e-5, name);
            }
            // TL's loss: mean over positions of -log p(next token).
            let ours = (0..t - 1)
                .map(|i| -f64::from(logp[i][tokens[i + 1] as usize]))
                .sum::<f64>()
                / (t - 1) as f64;
            assert!(
                (ours - loss.as_f64().unwrap()).abs() < 1e-4,
                "{name}: loss {ours} vs {loss}"
            );
        }
    }
    Ok(())
}

fn assert_close<'a>(
    got: impl Iterator<Item = &'a f32>,
    want: impl Iterator<Item = &'a f32>,
    tol: f32,
    what: &str,
) {
    let (mut n, mut worst) = (0, 0f32);
    for (g, w) in got.zip(want) {
        worst = worst.max((g - w).abs());
        n += 1;
    }
    assert!(
        n > 0 && worst < tol,
        "{what}: max |diff| {worst} over {n} values"
    );
}

#[test]
fn repeated_part_starts_after_the_first_copy() {
    let s = Sequence {
        tokens: vec![9, 1, 2, 3, 1, 2, 3, 1],
        prefix_len: 1,
        segment_len: 3,
    };
    let predictable: Vec<usize> = (0..8).filter(|&i| s.is_predictable(i)).collect();
    assert_eq!(predictable, vec![4, 5, 6]);
}

/// Sinusoidal positions: the trainer adds exactly the core's values (not trained, not exported), and the
/// exported model, converted, runs through the core as the candle forward pass computes it.
#[test]
fn sinusoidal_model_adds_the_cores_values_and_the_core_runs_it_as_trained() -> Result<()> {
    let cfg = small(2, Positional::Sinusoidal, Normalization::LN);
    let trained = train(&config(cfg, 10, 3), |_| {})?;
    let model = &trained.model;
    let table = values(&model.w_pos)?;
    let mut row = vec![0.0f32; cfg.d_model];
    for (pos, got) in table.chunks_exact(cfg.d_model).enumerate() {
        microlens::sinusoidal(pos, &mut row);
        assert_eq!(got, &row[..], "position {pos}");
    }
    assert!(model
        .named_vars()
        .iter()
        .all(|(n, _)| n != "pos_embed.W_pos"));

    let dir = scratch_dir("sinusoidal");
    let out = export(model, &dir, "m", 3)?;
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&out.config)?)?;
    assert_eq!(json["positional_embedding_type"], "sinusoidal");
    let opts = crate::convert::ConvertOptions {
        config: Some(out.config.clone()),
        ..Default::default()
    };
    let blob = crate::convert::convert(&out.weights, &opts)?.blob;
    let core = microlens::Model::from_bytes(&blob)?;
    assert!(core
        .matrix(microlens::TensorId::global(microlens::TensorKind::WPos))
        .is_none());
    let tokens: Vec<u32> = (0..16).map(|i| (i * 5 + 2) % 16).collect();
    let ours = crate::eval::run::run_model(&core, &tokens)?;
    let fwd = model.forward(&Tensor::from_vec(tokens.clone(), (1, 16), &Device::Cpu)?)?;
    let logp = candle_nn::ops::log_softmax(&fwd.logits.squeeze(0)?, 1)?.to_vec2::<f32>()?;
    let core_logp: Vec<Vec<f32>> = ours
        .logits
        .iter()
        .map(|l| crate::eval::run::log_softmax(l))
        .collect();
    assert_close(
        core_logp.iter().flatten(),
        logp.iter().flatten(),
        1e-4,
        "sinusoidal",
    );
    // And back: the files read into the same model.
    let back = load(&out.weights, &out.config)?;
    assert_eq!(values(&back.w_pos)?, table);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
