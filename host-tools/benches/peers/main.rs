//! microlens beside its peers, in one run on one machine: the shipped model
//! (`firmware-example/model/induction-2l`), 1024 sequences x 64 tokens (TransformerLens's repeated
//! random tokens), logits of every position.
//!
//! - decode, batch 1 with KV cache, 1 thread: microlens `Session::step` (host weights), candle;
//! - full forward, batch 64, 1 and 2 threads: microlens `Session::run` over a session of
//!   `BATCH_ROWS` rows (positions computed together, layer by layer; rayon over sequences),
//!   candle (its own matmul threads), TransformerLens `model(tokens)` and `run_with_cache` (torch CPU,
//!   `torch.set_num_threads`), when a Python with `transformer_lens` is found (`MICROLENS_PYTHON`, else
//!   `python3`; skipped with a line saying so otherwise).
//!
//! Every figure is the median of `MICROLENS_PEERS_RUNS` (default 5) timed runs after one warm-up.
//! Before timing, candle's and TransformerLens's log-probabilities are checked against microlens's (the
//! same function up to rounding). `cargo xtask bench-peers` runs it.

mod candle;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use microlens::host::HostWeights;
use microlens::{Model, Session};
use microlens_host::convert::{convert, ConvertOptions};
use microlens_host::eval::run::log_softmax;
use microlens_host::eval::sequences::repeated_random_tokens;
use rayon::prelude::*;

const SEQUENCES: usize = 1024;
const BATCH: usize = 64;
/// Positions microlens computes together in the full forward (`Session::with_rows`): the
/// commands' own choice, `eval::run::BATCH_ROWS`.
const ROWS: usize = microlens_host::eval::run::BATCH_ROWS;
/// Sequences TransformerLens decodes token by token (it is slow at it).
const TL_DECODE_SEQUENCES: usize = 8;

fn model_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../firmware-example/model")
}

/// Median seconds of `runs` timed calls of `f` after one untimed.
fn median_secs(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

/// Largest `|a - b|` over two sets of log-probability rows.
fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .zip(b)
        .flat_map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x - y).abs()))
        .fold(0.0, f32::max)
}

/// Largest `|d log p|` a peer may differ by and still compute the same function (rounding only).
const SAME_FUNCTION: f32 = 1e-3;

/// Prints how far `peer`'s log-probabilities are from microlens's, and stops the run if they are not
/// the same function (a peer that misses a component would be timed on less work).
fn check_same(peer: &str, ours: &[Vec<f32>], theirs: &[Vec<f32>]) {
    let d = max_diff(ours, theirs);
    println!(
        "{peer} vs microlens, max |d log p| over {} positions: {d:.2e}",
        theirs.len()
    );
    assert!(
        ours.len() == theirs.len() && d <= SAME_FUNCTION,
        "{peer} does not compute microlens's function (max |d log p| {d:.2e})"
    );
}

/// One measured mode: tokens per second of each engine (`None`: not measured).
struct Row {
    mode: &'static str,
    microlens: f64,
    candle: Option<f64>,
    tl: Option<f64>,
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported (the run is one table).
    let runs: usize = std::env::var("MICROLENS_PEERS_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let dir = model_dir();
    let (weights, config) = (
        dir.join("induction-2l.safetensors"),
        dir.join("induction-2l.json"),
    );
    let opts = ConvertOptions {
        config: Some(config.clone()),
        ..ConvertOptions::default()
    };
    let blob = convert(&weights, &opts)
        .expect("shipped model converts")
        .blob;
    let model = Model::from_bytes(&blob).expect("valid blob");
    let host = HostWeights::new(&model);
    let model = model.with_host(&host);
    let cfg = *model.config();
    let seqs = repeated_random_tokens(cfg.d_vocab, cfg.n_ctx / 2, SEQUENCES, 2026);
    let tokens = (SEQUENCES * cfg.n_ctx) as f64;
    let peer = candle::Peer::load(&weights, cfg.n_layers, cfg.layer_attn_scale(0) as f64)
        .expect("candle loads the shipped model");

    // The same function: candle's log-probabilities against microlens's on the first batch.
    let ours: Vec<Vec<f32>> = seqs[..BATCH]
        .iter()
        .flat_map(|s| microlens_host::eval::run::run_with_hooks(&model, s, &mut ()).unwrap())
        .map(|l| log_softmax(&l))
        .collect();
    let theirs = candle::log_softmax_rows(&peer.forward(&seqs[..BATCH]).unwrap()).unwrap();
    check_same("candle", &ours, &theirs);

    let decode_ml = median_secs(runs, || {
        let (mut kv, mut ws) = (
            vec![0.0; model.kv_cache_len()],
            vec![0.0; model.workspace_len()],
        );
        let mut session = Session::new(&model, &mut kv, &mut ws).expect("buffers");
        for s in &seqs {
            session.reset();
            for &t in s {
                std::hint::black_box(session.step(t).expect("in range"));
            }
        }
    });
    std::env::set_var("RAYON_NUM_THREADS", "1");
    let decode_candle = median_secs(runs, || {
        pool(1).install(|| {
            for s in &seqs {
                peer.decode(s, |l| {
                    std::hint::black_box(l);
                })
                .expect("candle decodes");
            }
        })
    });
    let mut full = Vec::new();
    for threads in [1usize, 2] {
        let p = pool(threads);
        let ml = median_secs(runs, || {
            p.install(|| {
                seqs.par_iter().for_each_init(
                    || {
                        (
                            vec![0.0; model.kv_cache_len()],
                            vec![0.0; model.workspace_len_rows(cfg.n_ctx, ROWS)],
                        )
                    },
                    |(kv, ws), s| {
                        let mut session =
                            Session::with_rows(&model, cfg.n_ctx, ROWS, kv, ws).expect("buffers");
                        session
                            .run(s, &mut (), |_, l| {
                                std::hint::black_box(l);
                            })
                            .expect("in range");
                    },
                )
            })
        });
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
        let cd = median_secs(runs, || {
            p.install(|| {
                for batch in seqs.chunks(BATCH) {
                    std::hint::black_box(peer.forward(batch).expect("candle runs"));
                }
            })
        });
        full.push((ml, cd));
    }

    let tl = transformer_lens(&weights, &config, &seqs, &ours, runs);
    let tl_get = |key: &str| tl.as_ref().and_then(|m| m.get(key).copied());
    let rows = [
        Row {
            mode: "decode, batch 1, KV cache, 1 thread",
            microlens: tokens / decode_ml,
            candle: Some(tokens / decode_candle),
            tl: tl_get("decode_1"),
        },
        Row {
            mode: "full forward, batch 64, 1 thread",
            microlens: tokens / full[0].0,
            candle: Some(tokens / full[0].1),
            tl: tl_get("model_1"),
        },
        Row {
            mode: "full forward, batch 64, 2 threads",
            microlens: tokens / full[1].0,
            candle: Some(tokens / full[1].1),
            tl: tl_get("model_2"),
        },
        Row {
            mode: "TL `run_with_cache`, batch 64, 1 thread",
            microlens: tokens / full[0].0,
            candle: None,
            tl: tl_get("cache_1"),
        },
        Row {
            mode: "TL `run_with_cache`, batch 64, 2 threads",
            microlens: tokens / full[1].0,
            candle: None,
            tl: tl_get("cache_2"),
        },
    ];
    print_table(&rows, runs);
}

/// Prints the markdown table of tokens per second and ratios.
fn print_table(rows: &[Row], runs: usize) {
    let k = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.0} k", v / 1e3));
    let ratio = |a: f64, b: Option<f64>| b.map_or("-".to_string(), |b| format!("{:.2}x", a / b));
    println!(
        "\nshipped model, {SEQUENCES} x 64 tokens, tokens/s (median of {runs} runs)\n\n\
         | mode | microlens | candle | TransformerLens | microlens / candle | microlens / TL |\n\
         |---|---|---|---|---|---|"
    );
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.mode,
            k(Some(r.microlens)),
            k(r.candle),
            k(r.tl),
            ratio(r.microlens, r.candle),
            ratio(r.microlens, r.tl)
        );
    }
}

/// TransformerLens's figures (`tl_peer.py`), keyed `model_1`, `cache_2`, `decode_1`, ...: `None`
/// (with a line saying why) when no Python with `transformer_lens` is found.
fn transformer_lens(
    weights: &Path,
    config: &Path,
    seqs: &[Vec<u32>],
    ours: &[Vec<f32>],
    runs: usize,
) -> Option<std::collections::BTreeMap<String, f64>> {
    let python = std::env::var("MICROLENS_PYTHON").unwrap_or_else(|_| "python3".into());
    let found = Command::new(&python)
        .args(["-c", "import transformer_lens"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!(
            "TransformerLens: skipped ({python} cannot import transformer_lens; set MICROLENS_PYTHON \
             to a Python that can, see host-tools/benches/peers/tl_peer.py)"
        );
        return None;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let tokens = dir.path().join("tokens.u32");
    let mut f = std::fs::File::create(&tokens).expect("tokens file");
    for t in seqs.iter().flatten() {
        f.write_all(&t.to_le_bytes()).expect("tokens written");
    }
    drop(f);
    let logprobs = dir.path().join("logprobs.f32");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/tl_peer.py");
    let out = Command::new(&python)
        .arg(&script)
        .args(["--weights", &weights.display().to_string()])
        .args(["--config", &config.display().to_string()])
        .args(["--tokens", &tokens.display().to_string()])
        .args(["--seq-len", &seqs[0].len().to_string()])
        .args(["--batch", &BATCH.to_string()])
        .args(["--runs", &runs.to_string()])
        .args(["--decode-sequences", &TL_DECODE_SEQUENCES.to_string()])
        .args(["--logprobs-out", &logprobs.display().to_string()])
        .output()
        .expect("python runs");
    if !out.status.success() {
        println!(
            "TransformerLens: failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    // The same function: TransformerLens's log-probabilities of the first batch against microlens's.
    let bytes = std::fs::read(&logprobs).expect("log-probabilities written");
    let d_vocab = ours[0].len();
    let theirs: Vec<Vec<f32>> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect::<Vec<_>>()
        .chunks_exact(d_vocab)
        .map(<[f32]>::to_vec)
        .collect();
    check_same("TransformerLens", ours, &theirs);
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    Some(
        text.lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some("tl")).then_some(())?;
                Some((w.next()?.to_string(), w.next()?.parse().ok()?))
            })
            .collect(),
    )
}
