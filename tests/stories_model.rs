//! The shipped LLaMA-family story model (`firmware-example/model/stories/`, `microlens train-llama`:
//! RMSNorm, rotary positions, grouped-query attention, SwiGLU, its own BPE `tokenizer.bin`): through
//! `microlens convert` and the core forward pass it continues a story in the corpus's English,
//! copying the story's names and things from its context, with the held-out loss training measured;
//! int8 (nearest rounding) keeps both.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;

use microlens::{DType, Model};
use microlens_host::analysis::mean_loss;
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::eval::generate::greedy;
use microlens_host::eval::run::run_model;
use microlens_host::quantize::Rounding;
use microlens_host::text::llama2c::{Llama2cTokenizer, BOS};
use microlens_host::train::stories::stories;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../firmware-example/model/stories")
}

/// The shipped model converted to `dtype` (once per test binary): int8 with nearest rounding (GPTQ
/// of this model costs minutes of CPU; `docs/training.md` gives the GPTQ figures).
fn shipped(dtype: DType) -> &'static [u8] {
    static BLOBS: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
    let blobs = BLOBS.get_or_init(|| {
        let ckpt = dir().join("stories-260k.safetensors");
        [(DType::F32, None), (DType::I8, Some(Rounding::Nearest))].map(|(dtype, rounding)| {
            let opts = ConvertOptions {
                dtype,
                rounding,
                ..ConvertOptions::default()
            };
            convert(&ckpt, &opts)
                .expect("the shipped story model converts")
                .blob
        })
    });
    match dtype {
        DType::F32 => &blobs[0],
        _ => &blobs[1],
    }
}

/// The greedy continuation of `prompt` (after BOS), decoded as llama2.c prints it.
fn continue_text(blob: &[u8], prompt: &str, n: usize) -> String {
    let model = Model::from_bytes(blob).unwrap();
    let tok = Llama2cTokenizer::load(&dir().join("tokenizer.bin"), model.config().d_vocab).unwrap();
    let mut ids = vec![BOS];
    ids.extend(tok.encode(prompt.as_bytes()).unwrap().ids);
    let new = greedy(&model, &ids, n).unwrap();
    String::from_utf8(tok.decode(&new).unwrap()).unwrap()
}

/// Every word of `text` is a word of the training stories or of `prompt`.
fn unknown_words(text: &str, prompt: &str) -> Vec<String> {
    let words = |s: &str| -> BTreeSet<String> {
        s.split(|c: char| !c.is_ascii_alphabetic())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let mut known = words(prompt);
    for s in stories(0, 3000) {
        known.extend(words(&s));
    }
    words(text)
        .into_iter()
        .filter(|w| !known.contains(w))
        .collect()
}

/// A story's opening: it goes on in the corpus's words, names the child and the kite again (copied
/// from the prompt, not the most frequent name or thing) and ends its sentences, in f32 and int8.
#[test]
fn continues_a_story_and_copies_its_name_and_thing() {
    let prompt = "One day, Tom went to the park. Tom had a red kite. ";
    for dtype in [DType::F32, DType::I8] {
        let text = continue_text(shipped(dtype), prompt, 40);
        println!("{dtype:?}: {prompt}|{text}");
        assert!(
            text.contains("Tom") && text.contains("kite"),
            "{dtype:?}: not copied: {text}"
        );
        assert!(text.matches('.').count() >= 2, "{dtype:?}: {text}");
        let unknown = unknown_words(&text, prompt);
        assert!(
            unknown.is_empty(),
            "{dtype:?}: words outside the corpus {unknown:?}: {text}"
        );
    }
}

/// Next-token loss on held-out stories (a seed training never used) through the core: what training
/// measured through candle, and int8 within 0.05 nats of f32.
#[test]
fn held_out_story_loss_through_the_core() {
    let tok = Llama2cTokenizer::load(&dir().join("tokenizer.bin"), 512).unwrap();
    let (f32_blob, i8_blob) = (shipped(DType::F32), shipped(DType::I8));
    let mut losses = [0f64; 2];
    let texts = stories(0xE7A1, 16);
    for text in &texts {
        let mut ids = vec![BOS];
        ids.extend(tok.encode(text.as_bytes()).unwrap().ids);
        ids.truncate(128);
        for (k, blob) in [f32_blob, i8_blob].into_iter().enumerate() {
            let model = Model::from_bytes(blob).unwrap();
            let logits = run_model(&model, &ids).unwrap().logits;
            losses[k] += mean_loss(&logits, &ids, 0) / texts.len() as f64;
        }
    }
    println!(
        "held-out story loss: f32 {:.4}, int8 {:.4}",
        losses[0], losses[1]
    );
    assert!(losses[0] < 0.6, "f32 loss {:.4}", losses[0]);
    assert!(
        losses[1] - losses[0] < 0.05,
        "int8 {:.4} vs f32 {:.4}",
        losses[1],
        losses[0]
    );
}
