//! Tests of the LLaMA-family trainer: its forward pass equals the core's on the exported files, the
//! files are what the converter reads, and training lowers the loss.

use anyhow::Result;
use candle_core::{Device, Tensor};

use super::llama::{Llama, LlamaConfig};
use super::llama_export::export;
use super::loss::{losses, Batch};
use super::sequence::Sequence;
use super::trainer::{optimise, rng, Schedule};
use crate::convert::{convert, ConvertOptions};
use crate::eval::run::{log_softmax, run_blob};

fn small(n_kv_heads: usize) -> LlamaConfig {
    LlamaConfig {
        n_layers: 2,
        d_model: 32,
        n_heads: 4,
        n_kv_heads,
        d_head: 8,
        d_mlp: 48,
        d_vocab: 40,
        n_ctx: 16,
        rotary_base: 10000.0,
        eps: 1e-5,
    }
}

/// A model with every norm weight drawn too (fresh ones are all 1, which would not test them).
fn random_model(cfg: LlamaConfig, seed: u64) -> Result<Llama> {
    let model = Llama::new(cfg, &mut rng(seed, 0))?;
    let mut r = rng(seed, 2);
    for (name, var) in model.named_vars() {
        if name.contains("ln") {
            let fresh = super::params::normal(&mut r, var.dims(), 0.3)?;
            var.set(&(fresh.as_tensor() + 1.0)?)?;
        }
    }
    Ok(model)
}

fn scratch_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("microlens-llama-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The trainer's forward pass is TransformerLens's: the converted files run through the core give the
/// same log-probs at every position (grouped and ungrouped key/value heads).
#[test]
fn candle_forward_equals_the_core_forward_of_the_exported_files() -> Result<()> {
    for kv in [4, 2, 1] {
        let cfg = small(kv);
        let model = random_model(cfg, 7 + kv as u64)?;
        let dir = scratch_dir(&format!("parity{kv}"));
        let out = export(&model, &dir, "m", 0, b"not read here")?;
        let opts = ConvertOptions {
            config: Some(out.config.clone()),
            ..ConvertOptions::default()
        };
        let blob = convert(&out.weights, &opts)?.blob;
        let tokens: Vec<u32> = (0..cfg.n_ctx as u32).map(|i| (i * 7 + 3) % 40).collect();
        let core = run_blob(&blob, &tokens)?.logits;
        let input = Tensor::from_vec(tokens.clone(), (1, tokens.len()), &Device::Cpu)?;
        let logits = model.forward(&input)?.squeeze(0)?.to_vec2::<f32>()?;
        let mut worst = 0f32;
        for (c, l) in core.iter().zip(&logits) {
            for (a, b) in log_softmax(c).iter().zip(log_softmax(l)) {
                worst = worst.max((a - b).abs());
            }
        }
        assert!(
            worst < 1e-4,
            "{kv} key/value heads: log-probs differ by {worst}"
        );
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

/// Sizes that cannot form a model are refused before any allocation.
#[test]
fn impossible_shapes_are_refused() {
    let mut cfg = small(3);
    assert!(cfg.validate().is_err(), "3 key/value heads for 4 heads");
    cfg = small(2);
    cfg.d_head = 7;
    assert!(cfg.validate().is_err(), "odd d_head");
    cfg = small(2);
    cfg.d_vocab = 1 << 20;
    cfg.d_model = 1 << 12;
    assert!(cfg.validate().is_err(), "too many parameters");
    assert!(small(2).validate().is_ok());
}

/// A few dozen steps on a repeating token stream lower the loss well below its start.
#[test]
fn training_lowers_the_loss() -> Result<()> {
    let cfg = small(2);
    let model = Llama::new(cfg, &mut rng(3, 0))?;
    let stream: Vec<u32> = (0..4000u32).map(|i| (i % 37 * 11) % 40).collect();
    let window = |at: usize| Sequence {
        tokens: stream[at..at + cfg.n_ctx].to_vec(),
        prefix_len: 0,
        segment_len: cfg.n_ctx,
    };
    let schedule = Schedule {
        steps: 60,
        lr: 1e-2,
        weight_decay: 0.0,
        warmup: 5,
        final_lr_frac: 0.1,
    };
    let mut first = None;
    let (last, _) = optimise(
        &model,
        &schedule,
        |step| {
            Ok((0..16)
                .map(|b| window((step * 97 + b * 131) % 3900))
                .collect())
        },
        |r| {
            first.get_or_insert(r.loss);
        },
    )?;
    let first = first.unwrap_or(0.0);
    assert!(first > 3.0, "initial loss {first} should be near ln 40");
    assert!(
        last.loss < first - 1.0,
        "loss {} did not fall from {first}",
        last.loss
    );
    let batch = Batch::new(&[window(123)])?;
    let held = losses(&model.forward(&batch.tokens)?, &batch)?
        .all
        .to_scalar::<f32>()?;
    assert!(f64::from(held) < first - 1.0, "held-out window loss {held}");
    Ok(())
}
