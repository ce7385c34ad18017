//! Text in, text out through the binary: `--text` equals `--tokens` of the same ids byte for byte, the
//! blob's tokenizer record, trace/edit/patch by text equal to the same by ids, `fidelity --text-file`,
//! and one clear line for each bad input, with nothing written.

use crate::binary::{microlens, ok, one_line_error, s};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use microlens::tensors::Catalogue;
use microlens::{Config, TensorKind};
use microlens_host::import::layout::tl_shape;
use serde_json::{json, Value};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

fn fixture_tokenizer() -> PathBuf {
    repo("tests/fixtures/tokenizer/tokenizer.json")
}

/// A random 2-layer model with `d_vocab` tokens and a 32-token context in `dir/ckpt`, with the fixture
/// tokenizer beside it when `tokenizer`; returns the checkpoint.
fn checkpoint(dir: &Path, d_vocab: usize, tokenizer: bool) -> PathBuf {
    let cfg = Config::new(2, 16, 2, 8, d_vocab, 32, Some(32));
    let ckpt_dir = dir.join("ckpt");
    std::fs::create_dir_all(&ckpt_dir).unwrap();
    // Every TransformerLens parameter, from a seeded LCG: weights ~ U(-0.5, 0.5), norm weights near 1.
    let mut state = 7u64;
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Catalogue::new(&cfg)
        .ids()
        .filter(|id| !matches!(id.kind, TensorKind::PosQ | TensorKind::PosK))
        .map(|id| {
            let shape = tl_shape(id.kind, &cfg);
            let norm = matches!(
                id.kind,
                TensorKind::Ln1W | TensorKind::Ln2W | TensorKind::LnFinalW
            );
            let data: Vec<u8> = (0..shape.iter().product::<usize>())
                .flat_map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let u = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                    (if norm { 1.0 + 0.2 * u } else { u }).to_le_bytes()
                })
                .collect();
            (id.to_string(), shape, data)
        })
        .collect();
    let views = tensors.iter().map(|(n, shape, b)| {
        let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), b);
        (n.clone(), view.unwrap())
    });
    let ckpt = ckpt_dir.join("model.safetensors");
    safetensors::tensor::serialize_to_file(views, None, &ckpt).unwrap();
    let config = json!({
        "n_layers": 2, "d_model": 16, "n_heads": 2, "d_head": 8, "d_mlp": 32, "n_ctx": 32,
        "d_vocab": d_vocab, "d_vocab_out": d_vocab, "act_fn": "gelu_new", "attn_only": false,
        "normalization_type": "LN", "eps": 1e-5, "positional_embedding_type": "standard",
        "attn_scale": 8f64.sqrt(),
    });
    std::fs::write(ckpt_dir.join("config.json"), config.to_string()).unwrap();
    if tokenizer {
        std::fs::copy(fixture_tokenizer(), ckpt_dir.join("tokenizer.json")).unwrap();
    }
    ckpt
}

/// The fixture's golden cases short enough for the 32-token context (with a BOS).
fn golden_cases() -> Vec<(String, Vec<u32>, Vec<String>)> {
    let g: Value = serde_json::from_str(
        &std::fs::read_to_string(repo("tests/fixtures/tokenizer/golden.json")).unwrap(),
    )
    .unwrap();
    g["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["text"].as_str().unwrap().to_string(),
                serde_json::from_value(c["ids"].clone()).unwrap(),
                serde_json::from_value(c["str_tokens"].clone()).unwrap(),
            )
        })
        .filter(|(_, ids, _): &(String, Vec<u32>, Vec<String>)| ids.len() < 32)
        .collect()
}

fn ids(list: &[u32]) -> String {
    list.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn text_is_tokens_byte_for_byte_with_the_recorded_tokenizer() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = checkpoint(dir.path(), 384, true);
    let blob = dir.path().join("m.mlb");
    let said = ok(&microlens(&["convert", s(&ckpt), "-o", s(&blob)]));
    assert!(
        said.contains("tokenizer: ") && said.contains("BOS 0"),
        "{said}"
    );
    let tok = fixture_tokenizer();
    let cases = golden_cases();
    assert!(cases.len() >= 8);
    for (text, golden, str_tokens) in &cases {
        let by_text = ok(&microlens(&[
            "run",
            s(&blob),
            "--text",
            text,
            "--tokenizer",
            s(&tok),
            "--json",
        ]));
        // GPT-2's default_prepend_bos: one <|endoftext|> (id 0) first.
        let with_bos = ids(&[&[0], &golden[..]].concat());
        let by_ids = ok(&microlens(&[
            "run",
            s(&blob),
            "--tokens",
            &with_bos,
            "--tokenizer",
            s(&tok),
            "--json",
        ]));
        assert_eq!(by_text, by_ids, "{text:?}");
        let json: Value = serde_json::from_str(&by_text).unwrap();
        let shown: Vec<String> = serde_json::from_value(json["str_tokens"].clone()).unwrap();
        assert_eq!(shown[0], "<|endoftext|>");
        assert_eq!(&shown[1..], &str_tokens[..], "{text:?}");
        let no_bos = ok(&microlens(&[
            "run",
            s(&blob),
            "--text",
            text,
            "--tokenizer",
            s(&tok),
            "--no-prepend-bos",
            "--json",
        ]));
        let plain = ok(&microlens(&[
            "run",
            s(&blob),
            "--tokens",
            &ids(golden),
            "--tokenizer",
            s(&tok),
            "--json",
        ]));
        assert_eq!(no_bos, plain, "{text:?}");
    }
    // tokenizer.json beside the blob is found by itself.
    std::fs::copy(&tok, dir.path().join("tokenizer.json")).unwrap();
    let table = ok(&microlens(&["run", s(&blob), "--text", "The Eiffel Tower"]));
    assert!(
        table.contains("\"<|endoftext|>\"") && table.contains("\"The\""),
        "{table}"
    );
    // The blob converted without a tokenizer takes one on the command line all the same.
    let plain_blob = dir.path().join("plain.mlb");
    ok(&microlens(&[
        "convert",
        s(&ckpt),
        "-o",
        s(&plain_blob),
        "--no-tokenizer",
    ]));
    let a = ok(&microlens(&[
        "run",
        s(&plain_blob),
        "--text",
        "Hello, world!",
        "--tokenizer",
        s(&tok),
        "--hash",
    ]));
    let b = ok(&microlens(&[
        "run",
        s(&blob),
        "--text",
        "Hello, world!",
        "--hash",
    ]));
    assert_eq!(a, b);
    // A record changes no logit: the same hash as the blob without one, on the same tokens.
    let c = ok(&microlens(&[
        "run",
        s(&plain_blob),
        "--tokens",
        "0,40,299",
        "--hash",
    ]));
    let d = ok(&microlens(&[
        "run",
        s(&blob),
        "--tokens",
        "0,40,299",
        "--hash",
    ]));
    assert_eq!(c, d);
    // generate decodes its continuation with the tokenizer.
    let g: Value = serde_json::from_str(&ok(&microlens(&[
        "generate",
        s(&blob),
        "--text",
        "The Eiffel",
        "--max-new-tokens",
        "3",
        "--json",
    ])))
    .unwrap();
    assert_eq!(g["tokens"].as_array().unwrap().len(), 3);
    assert!(g["text"].is_string());
}

#[test]
fn tokenizers_that_do_not_fit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = checkpoint(dir.path(), 384, true);
    let blob = dir.path().join("m.mlb");
    ok(&microlens(&["convert", s(&ckpt), "-o", s(&blob)]));
    // Without the tokenizer beside the blob or on the command line: what to do.
    one_line_error(
        &microlens(&["run", s(&blob), "--text", "The"]),
        "--tokenizer FILE",
    );
    // Another tokenizer than the recorded one (the same JSON, one byte of whitespace more).
    let other = dir.path().join("other.json");
    let mut bytes = std::fs::read(fixture_tokenizer()).unwrap();
    bytes.push(b'\n');
    std::fs::write(&other, &bytes).unwrap();
    one_line_error(
        &microlens(&["run", s(&blob), "--text", "The", "--tokenizer", s(&other)]),
        "not the one the blob was converted with",
    );
    // ids beyond d_vocab: at convert (nothing written) and at run.
    let small = tempfile::tempdir().unwrap();
    let ckpt = checkpoint(small.path(), 300, true);
    let out = small.path().join("small.mlb");
    one_line_error(
        &microlens(&["convert", s(&ckpt), "-o", s(&out)]),
        "d_vocab is 300",
    );
    assert!(!out.exists());
    ok(&microlens(&[
        "convert",
        s(&ckpt),
        "-o",
        s(&out),
        "--no-tokenizer",
    ]));
    one_line_error(
        &microlens(&[
            "run",
            s(&out),
            "--text",
            "The",
            "--tokenizer",
            s(&fixture_tokenizer()),
        ]),
        "d_vocab is 300",
    );
}

#[test]
fn hostile_tokenizers_and_texts_get_one_line_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = checkpoint(dir.path(), 384, false);
    let blob = dir.path().join("m.mlb");
    ok(&microlens(&["convert", s(&ckpt), "-o", s(&blob)]));
    let invalid = dir.path().join("invalid.json");
    std::fs::write(&invalid, "{\"model\": 3").unwrap();
    let truncated = dir.path().join("truncated.json");
    let full = std::fs::read(fixture_tokenizer()).unwrap();
    std::fs::write(&truncated, &full[..full.len() / 2]).unwrap();
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(100_000_000)
        .unwrap();
    let out = dir.path().join("out.mlb");
    for (bad, says) in [
        (&invalid, "not a HuggingFace tokenizer.json"),
        (&truncated, "not a HuggingFace tokenizer.json"),
        (&huge, "more than the"),
    ] {
        one_line_error(
            &microlens(&["run", s(&blob), "--text", "The", "--tokenizer", s(bad)]),
            says,
        );
        one_line_error(
            &microlens(&["convert", s(&ckpt), "-o", s(&out), "--tokenizer", s(bad)]),
            says,
        );
        assert!(!out.exists());
    }
    let tok = fixture_tokenizer();
    one_line_error(
        &microlens(&["run", s(&blob), "--text", "", "--tokenizer", s(&tok)]),
        "the text is empty",
    );
    // Text for a model without a tokenizer: what to give.
    one_line_error(
        &microlens(&["run", s(&blob), "--text", "The"]),
        "--tokenizer FILE",
    );
    let cache = dir.path().join("cache.safetensors");
    one_line_error(
        &microlens(&[
            "run",
            s(&blob),
            "--text",
            "",
            "--tokenizer",
            s(&tok),
            "--cache",
            s(&cache),
        ]),
        "empty",
    );
    assert!(!cache.exists());
}

/// The shipped fact model's tokens as words `t0` .. `t63`, one word-level token each.
fn word_tokenizer(path: &Path) {
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::Whitespace;
    let vocab: HashMap<String, u32> = (0..64).map(|i| (format!("t{i}"), i)).collect();
    let model = WordLevel::builder()
        .vocab(vocab.into_iter().collect())
        .unk_token("<unk>".into())
        .build()
        .unwrap();
    let mut tok = tokenizers::Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(Whitespace {}));
    tok.save(path, false).unwrap();
}

fn fact_blob(dir: &Path) -> PathBuf {
    let out = dir.join("facts.mlb");
    ok(&microlens(&[
        "convert",
        s(&repo("firmware-example/model/facts-4l.safetensors")),
        "-o",
        s(&out),
    ]));
    out
}

fn without(json: &str, keys: &[&str]) -> Value {
    let mut v: Value = serde_json::from_str(json).unwrap();
    for k in keys {
        assert!(v.get(k).is_some(), "no {k} in {json}");
        v.as_object_mut().unwrap().remove(*k);
    }
    v
}

#[test]
fn trace_edit_and_patch_by_text_equal_the_same_by_ids() {
    let dir = tempfile::tempdir().unwrap();
    let blob = fact_blob(dir.path());
    let words = dir.path().join("words.json");
    word_tokenizer(&words);
    let w = s(&words);
    let by_text = ok(&microlens(&[
        "trace",
        s(&blob),
        "--prompt-text",
        "t2 t21 t33",
        "--subject-text",
        "t2 t21",
        "--tokenizer",
        w,
        "--json",
    ]));
    let by_ids = ok(&microlens(&[
        "trace",
        s(&blob),
        "--prompt",
        "2,21,33",
        "--subject",
        "0..2",
        "--json",
    ]));
    assert_eq!(
        without(&by_text, &["str_tokens"]),
        serde_json::from_str::<Value>(&by_ids).unwrap()
    );
    assert!(
        by_text.contains(r#""str_tokens":["t2","t21","t33"]"#),
        "{by_text}"
    );

    let (a, b) = (dir.path().join("a.mlb"), dir.path().join("b.mlb"));
    let edit = |extra: &[&str], out: &Path| {
        let mut args = vec![
            "edit",
            s(&blob),
            "--no-quantise",
            "--calibration",
            "64",
            "--json",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", s(out)]);
        ok(&microlens(&args))
    };
    let by_text = edit(
        &[
            "--prompt-text",
            "t2 t21 t33",
            "--target-text",
            "t40",
            "--subject-text",
            "t2 t21",
            "--tokenizer",
            w,
        ],
        &a,
    );
    let by_ids = edit(
        &["--prompt", "2,21,33", "--target", "40", "--subject", "0..2"],
        &b,
    );
    assert_eq!(by_text, by_ids);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    // A blob converted with the word tokenizer records it, and its edit keeps the record: the edited
    // blob takes text with that tokenizer and refuses another.
    let tagged = dir.path().join("tagged.mlb");
    let facts = repo("firmware-example/model/facts-4l.safetensors");
    ok(&microlens(&[
        "convert",
        s(&facts),
        "-o",
        s(&tagged),
        "--tokenizer",
        w,
    ]));
    let edited = dir.path().join("edited.mlb");
    let mut args = vec![
        "edit",
        s(&tagged),
        "--no-quantise",
        "--calibration",
        "64",
        "--prompt-text",
    ];
    args.extend_from_slice(&[
        "t2 t21 t33",
        "--target-text",
        "t40",
        "--tokenizer",
        w,
        "-o",
        s(&edited),
    ]);
    ok(&microlens(&args));
    let beside = dir.path().join("tokenizer.json");
    std::fs::copy(&words, &beside).unwrap();
    let table = ok(&microlens(&["run", s(&edited), "--text", "t2 t21 t33"]));
    assert!(table.contains("\"t21\""), "{table}");
    let mut other = std::fs::read(&words).unwrap();
    other.push(b' ');
    std::fs::write(&beside, other).unwrap();
    one_line_error(
        &microlens(&["run", s(&edited), "--text", "t2 t21 t33"]),
        "not the one the blob was converted with",
    );
    std::fs::remove_file(&beside).unwrap();
    let json: Value = serde_json::from_str(&by_text).unwrap();
    assert!(
        json["target_prob_after"].as_f64().unwrap() > 0.5,
        "{by_text}"
    );

    let by_text = ok(&microlens(&[
        "patch",
        s(&blob),
        "--clean-text",
        "t2 t21 t33",
        "--corrupt-text",
        "t3 t21 t33",
        "--answer-text",
        "t44",
        "--wrong-text",
        "t40",
        "--tokenizer",
        w,
        "--json",
    ]));
    let by_ids = ok(&microlens(&[
        "patch",
        s(&blob),
        "--clean",
        "2,21,33",
        "--corrupt",
        "3,21,33",
        "--answer",
        "44",
        "--wrong",
        "40",
        "--json",
    ]));
    assert_eq!(
        without(&by_text, &["clean_str_tokens", "corrupt_str_tokens"]),
        serde_json::from_str::<Value>(&by_ids).unwrap()
    );

    // A subject not in the prompt, a target of two tokens, a word the tokenizer lacks.
    one_line_error(
        &microlens(&[
            "trace",
            s(&blob),
            "--prompt-text",
            "t2 t21 t33",
            "--subject-text",
            "t5",
            "--tokenizer",
            w,
        ]),
        "is not in the prompt",
    );
    let c = dir.path().join("c.mlb");
    one_line_error(
        &microlens(&[
            "edit",
            s(&blob),
            "--prompt-text",
            "t2 t21 t33",
            "--target-text",
            "t40 t41",
            "--tokenizer",
            w,
            "-o",
            s(&c),
        ]),
        "is 2 tokens",
    );
    one_line_error(
        &microlens(&[
            "edit",
            s(&blob),
            "--prompt-text",
            "t2 t21 Paris",
            "--target-text",
            "t40",
            "--tokenizer",
            w,
            "-o",
            s(&c),
        ]),
        "cannot tokenize",
    );
    assert!(!c.exists());
    // The word-level tokenizer has no BOS token to prepend.
    one_line_error(
        &microlens(&[
            "run",
            s(&blob),
            "--text",
            "t2",
            "--tokenizer",
            w,
            "--prepend-bos",
        ]),
        "no BOS token",
    );
}

#[test]
fn fidelity_on_a_text_file_and_bad_text_files() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = repo("firmware-example/model/induction-bytes.safetensors");
    let (f32, i8) = (dir.path().join("f32.mlb"), dir.path().join("i8.mlb"));
    ok(&microlens(&["convert", s(&ckpt), "-o", s(&f32)]));
    ok(&microlens(&[
        "convert",
        s(&ckpt),
        "-o",
        s(&i8),
        "--dtype",
        "i8",
        "--rounding",
        "nearest",
    ]));
    let corpus = repo("tests/fixtures/tokenizer/corpus.txt");
    let json: Value = serde_json::from_str(&ok(&microlens(&[
        "fidelity",
        s(&f32),
        s(&i8),
        "--text-file",
        s(&corpus),
        "--seq-len",
        "64",
        "--json",
    ])))
    .unwrap();
    // 2,960 bytes: 46 windows of 64 byte tokens.
    let sequences = json["sequences"]
        .as_u64()
        .or_else(|| json["n_sequences"].as_u64());
    assert_eq!(sequences, Some(46), "{json}");
    assert!(json["mean_kl"].as_f64().unwrap() > 0.0);
    let nul = dir.path().join("nul.txt");
    std::fs::write(&nul, b"tiny models\0read text").unwrap();
    let latin1 = dir.path().join("latin1.txt");
    std::fs::write(&latin1, b"caf\xe9 au lait").unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, b"  \n").unwrap();
    for (bad, says) in [
        (&nul, "NUL byte"),
        (&latin1, "is not UTF-8 text (byte 3"),
        (&empty, "holds no text"),
    ] {
        one_line_error(
            &microlens(&["fidelity", s(&f32), s(&i8), "--text-file", s(bad)]),
            says,
        );
    }
}

#[test]
fn circuits_by_text_equal_circuits_by_ids_on_the_repeated_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = checkpoint(dir.path(), 384, true);
    let blob = dir.path().join("m.mlb");
    ok(&microlens(&["convert", s(&ckpt), "-o", s(&blob)]));
    std::fs::copy(fixture_tokenizer(), dir.path().join("tokenizer.json")).unwrap();
    let text = "The Eiffel Tower is in";
    let run: Value = serde_json::from_str(&ok(&microlens(&[
        "run",
        s(&blob),
        "--text",
        text,
        "--json",
    ])))
    .unwrap();
    let with_bos: Vec<u32> = serde_json::from_value(run["tokens"].clone()).unwrap();
    assert_eq!(with_bos[0], 0);
    let body = &with_bos[1..];
    let by_text = ok(&microlens(&[
        "circuits",
        s(&blob),
        "--text",
        text,
        "--json",
    ]));
    let by_ids = ok(&microlens(&[
        "circuits",
        s(&blob),
        "--tokens",
        &ids(&with_bos),
        "--json",
    ]));
    assert_eq!(by_text, by_ids);
    // The BOS token once, then the text twice; the loss counted on the repeat.
    let json: Value = serde_json::from_str(&by_text).unwrap();
    let repeated = [&[0], body, body].concat();
    assert_eq!(json["tokens"], json!(repeated));
    assert_eq!(json["sequences"]["count"], 1);
    assert_eq!(json["sequences"]["prefix"], 1);
    assert_eq!(json["ablation"]["from_pos"], 1 + body.len());
    let shown: Vec<String> = serde_json::from_value(json["str_tokens"].clone()).unwrap();
    let run_shown: Vec<String> = serde_json::from_value(run["str_tokens"].clone()).unwrap();
    assert_eq!(shown, [&run_shown[..], &run_shown[1..]].concat());
    // Without BOS the whole text is repeated; the table shows the string tokens.
    let plain: Value = serde_json::from_str(&ok(&microlens(&[
        "circuits",
        s(&blob),
        "--text",
        text,
        "--no-prepend-bos",
        "--json",
    ])))
    .unwrap();
    assert_eq!(plain["tokens"], json!([body, body].concat()));
    assert_ne!(plain["heads"], json["heads"]);
    let table = ok(&microlens(&["circuits", s(&blob), "--text", text]));
    assert!(
        table.contains("\"<|endoftext|>\"") && table.contains("the given sequence: 1 + 2 x"),
        "{table}"
    );
    // 1 + 2 x 16 tokens exceed n_ctx = 32.
    let long: Vec<u32> = (1..=16).collect();
    one_line_error(
        &microlens(&[
            "circuits",
            s(&blob),
            "--tokens",
            &ids(&[&[0], &long[..]].concat()),
        ]),
        "n_ctx = 32",
    );
    one_line_error(
        &microlens(&[
            "circuits",
            s(&blob),
            "--text",
            &"The Eiffel Tower is in Paris. ".repeat(4),
        ]),
        "n_ctx = 32",
    );
}

/// A llama2.c version 1 checkpoint (`dim 16, hidden 24, 1 layer, 2 heads, 1 key/value head, vocab
/// 448 (the fixture tokenizer.bin's), 32 positions, classifier shared with the embedding`) with seeded
/// weights, `tokenizer.bin` beside it; returns the checkpoint.
fn llama2c_checkpoint(dir: &Path) -> PathBuf {
    let (dim, hidden, layers, heads, kv, vocab, seq) = (16, 24, 1, 2, 1, 448, 32);
    let mut b = 0x616b_3432u32.to_le_bytes().to_vec();
    for v in [1, dim, hidden, layers, heads, kv, vocab, seq] {
        b.extend(i32::to_le_bytes(v));
    }
    b.push(1);
    b.resize(256, 0);
    let kv_dim = kv * dim / heads;
    let norms = [layers * dim, layers * dim, dim];
    let matrices = [
        vocab * dim,
        layers * dim * dim,
        layers * kv_dim * dim,
        layers * kv_dim * dim,
        layers * dim * dim,
        layers * hidden * dim,
        layers * dim * hidden,
        layers * hidden * dim,
    ];
    let mut state = 11u64;
    for (i, n) in norms.into_iter().chain(matrices).enumerate() {
        for _ in 0..n {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            let v = if i < norms.len() { 1.0 + 0.2 * u } else { u };
            b.extend(v.to_le_bytes());
        }
    }
    let ckpt_dir = dir.join("llama2c");
    std::fs::create_dir_all(&ckpt_dir).unwrap();
    let ckpt = ckpt_dir.join("model.bin");
    std::fs::write(&ckpt, b).unwrap();
    let tokenizer = repo("tests/fixtures/llama2c_tokenizer/tokenizer.bin");
    std::fs::copy(tokenizer, ckpt_dir.join("tokenizer.bin")).unwrap();
    ckpt
}

#[test]
fn llama2c_checkpoint_and_tokenizer_read_and_generate_text() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = llama2c_checkpoint(dir.path());
    let blob = dir.path().join("m.mlb");
    let said = ok(&microlens(&["convert", s(&ckpt), "-o", s(&blob)]));
    assert!(
        said.contains("config from the llama2.c checkpoint") && said.contains("BOS 1"),
        "{said}"
    );
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(repo("tests/fixtures/llama2c_tokenizer/golden.json")).unwrap(),
    )
    .unwrap();
    let tok = ckpt.with_file_name("tokenizer.bin");
    for case in golden["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let want: Vec<u32> = serde_json::from_value(case["ids"].clone()).unwrap();
        let by_text = ok(&microlens(&[
            "run",
            s(&blob),
            "--text",
            text,
            "--tokenizer",
            s(&tok),
            "--json",
        ]));
        // llama2.c's generation starts at BOS (id 1): the default here too.
        let by_ids = ok(&microlens(&[
            "run",
            s(&blob),
            "--tokens",
            &ids(&[&[1], &want[..]].concat()),
            "--tokenizer",
            s(&tok),
            "--json",
        ]));
        assert_eq!(by_text, by_ids, "{text:?}");
    }
    // tokenizer.bin beside the blob is found by itself; generate decodes its continuation.
    std::fs::copy(&tok, dir.path().join("tokenizer.bin")).unwrap();
    let g: Value = serde_json::from_str(&ok(&microlens(&[
        "generate",
        s(&blob),
        "--text",
        "Once upon a time",
        "--max-new-tokens",
        "4",
        "--json",
    ])))
    .unwrap();
    assert_eq!(g["tokens"].as_array().unwrap().len(), 4);
    assert!(g["text"].is_string());
    // A tokenizer of another vocabulary size is one clear line.
    let other = dir.path().join("other.bin");
    let mut bytes = std::fs::read(&tok).unwrap();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&other, bytes).unwrap();
    one_line_error(
        &microlens(&["run", s(&blob), "--text", "a", "--tokenizer", s(&other)]),
        "tokenizer.bin",
    );
}
