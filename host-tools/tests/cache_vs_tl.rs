//! The activation cache against TransformerLens's `run_with_cache(tokens, remove_batch_dim=True)` (with
//! `use_attn_result=True`): every key TransformerLens has, same shape, values within 1e-4 relative
//! (`|ours - theirs| <= 1e-4 (1 + |theirs|)`). The processed blobs get exactly the processing
//! TransformerLens applied (`expected.processing`), so the shortformer fixture compares too (the
//! converter's default would fold its norms further, by design).

mod common;

use microlens::{HookKinds, Model};
use microlens_host::eval::cache::ActivationCache;
use microlens_host::io::safetensors::{from_safetensors, read_safetensors, to_safetensors};

fn tokens(name: &str) -> Vec<u32> {
    common::expected(name)["cases"][0]["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_u64().unwrap() as u32)
        .collect()
}

fn compare(name: &str, processed: bool) -> f64 {
    let file = if processed {
        "cache_processed.safetensors"
    } else {
        "cache.safetensors"
    };
    let theirs = read_safetensors(&common::dir(name).join(file)).unwrap();
    let blob = common::blob(name, processed);
    let model = Model::from_bytes(&blob).unwrap();
    let tokens = tokens(name);
    let (cache, _) = ActivationCache::record(&model, &tokens, HookKinds::ALL).unwrap();
    let ours = cache.tensors(model.config(), tokens.len());
    // Round trip through the file format the command writes.
    let ours = from_safetensors(&to_safetensors(&ours).unwrap()).unwrap();
    let mut worst: f64 = 0.0;
    for (key, t) in &theirs {
        let o = ours
            .get(key)
            .unwrap_or_else(|| panic!("{name}: no {key} in our cache"));
        assert_eq!(o.shape, t.shape, "{name} {key}");
        for (i, (&a, &b)) in o.data.iter().zip(&t.data).enumerate() {
            if a == b {
                continue; // equal infinities above the diagonal of hook_attn_scores
            }
            let rel = (a as f64 - b as f64).abs() / (1.0 + (b as f64).abs());
            assert!(
                rel <= 1e-4,
                "{name} {file} {key}[{i}]: ours {a}, TransformerLens {b}"
            );
            worst = worst.max(rel);
        }
    }
    let extra: Vec<&String> = ours.keys().filter(|k| !theirs.contains_key(*k)).collect();
    println!(
        "{name:24} {file:28} {} keys, max |diff|/(1+|tl|) {worst:.2e}, extra keys {extra:?}",
        theirs.len()
    );
    worst
}

#[test]
fn unprocessed_caches_match_transformer_lens() {
    for name in common::with_cache() {
        compare(name, false);
    }
}

#[test]
fn processed_caches_match_transformer_lens() {
    for name in common::with_cache() {
        compare(name, true);
    }
}
