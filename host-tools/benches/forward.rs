//! Forward speed (tokens per second) of the core crate.
//!
//! - `f32_forward_full_context`: the TransformerLens fixture models, a full context decoded token by
//!   token over the KV cache with the device's loops (what a firmware runs);
//! - `f32_forward_full_context_host`: the same with the host's column-blocked weights attached
//!   ([`HostWeights`], the same bits);
//! - `shipped`: the shipped model (`firmware-example/model/induction-2l`), 64 sequences x 64 tokens:
//!   decode batch 1 on one thread (device loops and host weights), and the full forward (logits of
//!   every position) over sequences on 1 and 2 rayon threads. The peers (candle, TransformerLens) are
//!   in the `peers` bench.
//!
//! `cargo bench -p microlens-host --bench forward`

use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use microlens::host::HostWeights;
use microlens::{Model, Session};
use microlens_host::convert::{convert, ConvertOptions};
use rayon::prelude::*;

const MODELS: [&str; 4] = ["attn_only_2l", "gpt2_like", "lnpre_relu_3l", "rotary_rms"];

fn fixture(name: &str) -> Vec<u8> {
    let ckpt = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
        .join("model.safetensors");
    convert(&ckpt, &ConvertOptions::default())
        .expect("fixture converts")
        .blob
}

/// Decodes `tokens` from position 0, every position's logits black-boxed.
fn decode(session: &mut Session<'_, '_>, tokens: &[u32]) {
    session.reset();
    for &t in tokens {
        std::hint::black_box(session.step(t).expect("in range"));
    }
}

fn forward(c: &mut Criterion) {
    for host in [false, true] {
        let name = match host {
            false => "f32_forward_full_context",
            true => "f32_forward_full_context_host",
        };
        let mut group = c.benchmark_group(name);
        for name in MODELS {
            let blob = fixture(name);
            let model = Model::from_bytes(&blob).expect("valid blob");
            let prepared = HostWeights::new(&model);
            let model = match host {
                true => model.with_host(&prepared),
                false => model,
            };
            let n_ctx = model.config().n_ctx;
            let tokens: Vec<u32> = (0..n_ctx as u32)
                .map(|i| (i * 7 + 3) % model.config().d_vocab as u32)
                .collect();
            let (mut kv, mut ws) = (
                vec![0.0; model.kv_cache_len()],
                vec![0.0; model.workspace_len()],
            );
            let mut session =
                Session::new(&model, &mut kv, &mut ws).expect("buffers sized by the model");
            group.throughput(Throughput::Elements(n_ctx as u64));
            group.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter(|| decode(&mut session, &tokens))
            });
        }
        group.finish();
    }
}

fn shipped_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../firmware-example/model")
}

/// `n` pseudo-random sequences of `len` tokens below `vocab`.
fn sequences(n: usize, len: usize, vocab: u32) -> Vec<Vec<u32>> {
    let mut s = 0x2545_f491u32;
    (0..n)
        .map(|_| {
            (0..len)
                .map(|_| {
                    s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (s >> 8) % vocab
                })
                .collect()
        })
        .collect()
}

fn shipped(c: &mut Criterion) {
    let dir = shipped_dir();
    let opts = ConvertOptions {
        config: Some(dir.join("induction-2l.json")),
        ..ConvertOptions::default()
    };
    let blob = convert(&dir.join("induction-2l.safetensors"), &opts)
        .expect("shipped model converts")
        .blob;
    let model = Model::from_bytes(&blob).expect("valid blob");
    let prepared = HostWeights::new(&model);
    let fast = model.with_host(&prepared);
    let cfg = *model.config();
    let seqs = sequences(64, cfg.n_ctx, cfg.d_vocab as u32);
    let n_tokens = (seqs.len() * cfg.n_ctx) as u64;

    let mut group = c.benchmark_group("shipped");
    group.throughput(Throughput::Elements(n_tokens));
    for (label, m) in [
        ("decode_1_thread/device_loops", &model),
        ("decode_1_thread/host", &fast),
    ] {
        let (mut kv, mut ws) = (vec![0.0; m.kv_cache_len()], vec![0.0; m.workspace_len()]);
        let mut session = Session::new(m, &mut kv, &mut ws).expect("buffers");
        group.bench_function(label, |b| {
            b.iter(|| seqs.iter().for_each(|s| decode(&mut session, s)))
        });
    }
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("thread pool");
        group.bench_function(format!("full_forward_{threads}_threads/host"), |b| {
            b.iter(|| {
                pool.install(|| {
                    seqs.par_iter().for_each_init(
                        || {
                            (
                                vec![0.0; fast.kv_cache_len()],
                                vec![0.0; fast.workspace_len()],
                            )
                        },
                        |(kv, ws), s| {
                            let mut session = Session::new(&fast, kv, ws).expect("buffers");
                            decode(&mut session, s)
                        },
                    )
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, forward, shipped);
criterion_main!(benches);
