//! The tokenizer layer against HuggingFace's Python `tokenizers` (`tests/fixtures/tokenizer`): a
//! GPT-2-style byte-level BPE trained here with the crate's trainer is the committed `tokenizer.json`,
//! and ids, offsets, decoded text and string tokens equal the golden ones.

use std::path::PathBuf;

use microlens_host::text::hf::HfTokenizer;
use microlens_host::text::TextTokenizer;
use serde_json::Value;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::TrainerWrapper;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, DecoderWrapper, PostProcessorWrapper, PreTokenizerWrapper};
use tokenizers::{ModelWrapper, NormalizerWrapper, TokenizerImpl};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/tokenizer")
        .join(name)
}

fn golden() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("golden.json")).unwrap()).unwrap()
}

#[test]
fn training_here_gives_the_committed_tokenizer() {
    let g = golden();
    let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
        .vocab_size(g["vocab_size"].as_u64().unwrap() as usize)
        .min_frequency(g["min_frequency"].as_u64().unwrap())
        .special_tokens(vec![AddedToken::from(
            g["special"].as_str().unwrap().to_string(),
            true,
        )])
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .show_progress(false)
        .build()
        .into();
    let mut tok: TokenizerImpl<
        ModelWrapper,
        NormalizerWrapper,
        PreTokenizerWrapper,
        PostProcessorWrapper,
        DecoderWrapper,
    > = TokenizerImpl::new(BPE::default().into());
    tok.with_pre_tokenizer(Some(PreTokenizerWrapper::from(
        ByteLevel::default().add_prefix_space(false),
    )));
    tok.with_decoder(Some(DecoderWrapper::from(ByteLevel::default())));
    tok.with_post_processor(Some(PostProcessorWrapper::from(
        ByteLevel::default().trim_offsets(false),
    )));
    let corpus = fixture("corpus.txt").to_str().unwrap().to_string();
    tok.train_from_files(&mut trainer, vec![corpus]).unwrap();
    let trained: Value = serde_json::from_str(&tok.to_string(false).unwrap()).unwrap();
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("tokenizer.json")).unwrap()).unwrap();
    assert_eq!(
        trained["model"], committed["model"],
        "vocabulary and merges"
    );
    assert_eq!(trained, committed);
}

#[test]
fn encodings_equal_the_python_ones() {
    let hf = HfTokenizer::load(&fixture("tokenizer.json")).unwrap();
    assert_eq!(hf.bos(), Some(0), "<|endoftext|> is GPT-2's BOS");
    let cases = golden()["cases"].as_array().unwrap().clone();
    assert!(cases.len() >= 10);
    for case in &cases {
        let text = case["text"].as_str().unwrap();
        let ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        let offsets: Vec<(usize, usize)> = serde_json::from_value(case["offsets"].clone()).unwrap();
        let tokens: Vec<String> = serde_json::from_value(case["tokens"].clone()).unwrap();
        let str_tokens: Vec<String> = serde_json::from_value(case["str_tokens"].clone()).unwrap();
        let e = hf.inner().encode_char_offsets(text, false).unwrap();
        assert_eq!(e.get_ids(), ids, "{text:?}");
        assert_eq!(e.get_offsets(), offsets, "{text:?}");
        assert_eq!(e.get_tokens(), tokens, "{text:?}");
        // The same through the tool's tokenizer: TransformerLens's to_tokens and to_str_tokens.
        let t = TextTokenizer::Hf(Box::new(
            HfTokenizer::load(&fixture("tokenizer.json")).unwrap(),
        ));
        let encoded = t.encode(text, false).unwrap();
        assert_eq!(encoded.ids, ids, "{text:?}");
        assert_eq!(t.decode(&ids).unwrap(), case["decoded"].as_str().unwrap());
        assert_eq!(
            t.decode(&ids).unwrap(),
            text,
            "decoding gives the text back"
        );
        assert_eq!(t.str_tokens(&ids).unwrap(), str_tokens, "{text:?}");
        // Byte offsets cover the same characters as the character offsets.
        for (&(bs, be), &(cs, ce)) in encoded.offsets.iter().zip(&offsets) {
            let chars = |b: usize| text[..b].chars().count();
            assert_eq!((chars(bs), chars(be)), (cs, ce), "{text:?}");
        }
        // TransformerLens's prepend_bos: one BOS first, the text's own tokens unchanged.
        let with_bos = t.encode(text, true).unwrap();
        assert_eq!(with_bos.ids[0], 0);
        assert_eq!(&with_bos.ids[1..], &ids[..]);
    }
}
