//! The shipped byte-level model (`firmware-example/model/induction-bytes`, vocabulary 256): the held-out
//! induction tests through the core forward (repeated random byte strings drawn with replacement,
//! repeated English phrases it never saw), and its greedy continuation of a repeated phrase.

use std::path::PathBuf;

use microlens::Model;
use microlens_host::commands::generate::{bytes_text, greedy};
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::train::heldout::{score, Suite};

/// Seed of the held-out sequences (not the training seed).
const HELD_OUT_SEED: u64 = 4242;

fn blob() -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let ckpt = root.join("../firmware-example/model/induction-bytes.safetensors");
    convert(&ckpt, &ConvertOptions::default())
        .expect("the byte model converts")
        .blob
}

#[test]
fn held_out_byte_induction_tests_pass_the_thresholds() {
    let blob = blob();
    let model = Model::from_bytes(&blob).unwrap();
    assert_eq!(model.config().d_vocab, 256);
    for (suite, min) in [
        (Suite::RepeatedWithReplacement, 0.97),
        (Suite::PrefixRepeatedWithReplacement, 0.95),
        (Suite::RepeatedDistinct, 0.99),
        (Suite::RepeatedPhrases, PHRASES_MIN),
    ] {
        let s = score(&model, suite, 256, HELD_OUT_SEED).unwrap();
        println!(
            "{}: accuracy {:.4} (last-occurrence rule {:.4})",
            s.description, s.accuracy, s.last_occurrence
        );
        assert!(
            s.accuracy >= min,
            "{}: {} < {min}",
            s.description,
            s.accuracy
        );
    }
}

/// Accuracy required on repeated held-out English phrases.
const PHRASES_MIN: f64 = 0.95;

#[test]
fn continues_a_repeated_phrase() {
    let blob = blob();
    let model = Model::from_bytes(&blob).unwrap();
    let phrase = "the cat sat on the mat. ";
    let prompt: Vec<u32> = format!("{phrase}{phrase}the c")
        .bytes()
        .map(u32::from)
        .collect();
    let new = greedy(&model, &prompt, 12).unwrap();
    let text = bytes_text(&new);
    println!("continuation: {text:?}");
    assert_eq!(text, "at sat on th");
}
