//! The activation cache against TransformerLens's `run_with_cache(tokens, remove_batch_dim=True)` (with
//! `use_attn_result=True`): every key TransformerLens has, same shape, values within 1e-4 relative
//! (`|ours - theirs| <= 1e-4 (1 + |theirs|)`). The processed blobs get exactly the processing
//! TransformerLens applied (`expected.processing`), so the shortformer fixture compares too (the
//! converter's default would fold its norms further, by design).

use crate::common;

use microlens::{HookKinds, Model};
use microlens_host::eval::batch_cache::record_batch;
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

/// A batch of the fixture's tokens, reversed and rotated: each sequence's activations as the
/// per-sequence cache has them, bit for bit, under the same names and shapes.
#[test]
fn a_batch_cache_stacks_the_per_sequence_caches() {
    for name in common::with_cache() {
        for processed in [false, true] {
            let blob = common::blob(name, processed);
            let model = Model::from_bytes(&blob).unwrap();
            let first = tokens(name);
            let mut rotated = first.clone();
            rotated.rotate_left(1);
            let rows = vec![
                first.clone(),
                first.iter().rev().copied().collect(),
                rotated,
            ];
            let batch = record_batch(&model, &rows, HookKinds::ALL, |_| true).unwrap();
            let singles: Vec<_> = rows
                .iter()
                .map(|r| {
                    let (cache, logits) =
                        ActivationCache::record(&model, r, HookKinds::ALL).unwrap();
                    (cache.tensors(model.config(), r.len()), logits)
                })
                .collect();
            assert_eq!(batch.tensors.len(), singles[0].0.len(), "{name}");
            for t in &batch.tensors {
                assert_eq!(t.data.len(), rows.len() * t.layout.len());
                let per_row = t.data.chunks_exact(t.layout.len());
                for (i, (part, (single, _))) in per_row.zip(&singles).enumerate() {
                    let s = &single[&t.name];
                    assert_eq!(t.shape(rows.len())[1..], s.shape[..], "{name} {}", t.name);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(part), bits(&s.data), "{name} {} sequence {i}", t.name);
                }
            }
            let dv = model.config().d_vocab_out;
            let flat: Vec<f32> = singles.iter().flat_map(|(_, l)| l.concat()).collect();
            assert_eq!(batch.logits.len(), rows.len() * first.len() * dv);
            assert_eq!(batch.logits, flat, "{name}");
        }
    }
}

/// A batch records only the activations asked for; sequences of different lengths and a bad token
/// are refused, naming the sequence.
#[test]
fn a_batch_cache_keeps_what_is_asked_and_refuses_bad_batches() {
    let name = common::with_cache().next().unwrap();
    let blob = common::blob(name, true);
    let model = Model::from_bytes(&blob).unwrap();
    let t = tokens(name);
    let wanted = "blocks.0.attn.hook_pattern";
    let kinds = HookKinds::of(&[microlens::HookKind::Pattern]);
    let batch = record_batch(&model, &[t.clone(), t.clone()], kinds, |n| n == wanted).unwrap();
    let names: Vec<&str> = batch.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, [wanted]);
    let ragged = record_batch(&model, &[t.clone(), t[1..].to_vec()], kinds, |_| true);
    assert!(ragged.unwrap_err().to_string().contains("must all have"));
    let mut bad = t.clone();
    bad[3] = model.config().d_vocab as u32;
    let err = record_batch(&model, &[t.clone(), bad], kinds, |_| true).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        format!(
            "sequence 1 of the batch: token {} at position 3 is out of range (d_vocab = {})",
            model.config().d_vocab,
            model.config().d_vocab
        )
    );
}
