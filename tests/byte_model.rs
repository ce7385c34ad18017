//! The shipped byte-level induction model (`firmware-example/model/induction-bytes`, vocabulary 256):
//! issue 14's held-out induction tests on random bytes drawn with replacement and on repeated English
//! phrases, through `microlens convert` and the core forward pass, and its greedy continuation of a
//! repeated phrase.

use std::path::PathBuf;

use microlens::Model;
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::eval::generate::{bytes_text, greedy, BYTE_VOCAB};
use microlens_host::train::heldout::Suite;
use microlens_tests::assert_held_out;

fn shipped() -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let ckpt = root.join("../firmware-example/model/induction-bytes.safetensors");
    convert(&ckpt, &ConvertOptions::default())
        .expect("the shipped byte model converts")
        .blob
}

/// The goals as written in issue 14 (the token model's three, on bytes) and the English phrases: at
/// least 97% on `2 x 32` random bytes with replacement, 95% on a random prefix + a repeated segment with
/// replacement, 99% on `2 x 32` distinct bytes, and 90% on a held-out English phrase repeated after an
/// English prefix (`docs/training.md` says why not 95%).
#[test]
fn held_out_induction_tests_on_bytes_and_english_phrases() {
    let blob = shipped();
    let model = Model::from_bytes(&blob).unwrap();
    assert_eq!(model.config().d_vocab, BYTE_VOCAB);
    assert_eq!(Suite::for_vocab(BYTE_VOCAB).len(), 4, "the phrases run");
    assert_held_out(
        &model,
        &[
            (Suite::RepeatedWithReplacement, 0.97),
            (Suite::PrefixRepeatedWithReplacement, 0.95),
            (Suite::RepeatedDistinct, 0.99),
            (Suite::RepeatedPhrases, 0.90),
        ],
    );
}

/// `microlens generate --text`'s greedy decoding continues a repeated phrase the model never saw (the
/// firmware's prompt) with the phrase.
#[test]
fn greedy_generation_continues_a_repeated_phrase() {
    let blob = shipped();
    let model = Model::from_bytes(&blob).unwrap();
    let phrase = "tiny models read text. ";
    let prompt: Vec<u32> = phrase.repeat(2).bytes().map(u32::from).collect();
    let new = greedy(&model, &prompt, 16).unwrap();
    let text = bytes_text(&new);
    println!("{}|{text}", phrase.repeat(2));
    assert_eq!(text, phrase[..16]);
}
