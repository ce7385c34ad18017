//! Forward speed (tokens per second) of the core crate.
//!
//! - `f32_forward_full_context`: the TransformerLens fixture models, a full context decoded token by
//!   token over the KV cache with the device's loops (what a firmware runs);
//! - `f32_forward_full_context_host`: the same with the host's column-blocked weights attached
//!   ([`HostWeights`], the same bits);
//! - `shipped`: the shipped model (`firmware-example/model/induction-2l`), 64 sequences x 64 tokens:
//!   decode batch 1 on one thread (microlens host path, and a candle 0.11 decoder of the same weights
//!   with a KV cache), and the full forward (logits of every position) over sequences on 1 and 2
//!   rayon threads.
//!
//! `cargo bench -p microlens-host --bench forward`

use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor, D};
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

/// A candle decoder of the shipped (attention-only, no norms, learned positions) model, with a KV
/// cache: the peer the issue measures against.
struct Candle {
    w_e: Tensor,
    w_pos: Tensor,
    /// Per layer `(W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O)`, the projections as `[d_model, n_heads *
    /// d_head]` (and `W_O` as `[n_heads * d_head, d_model]`).
    layers: Vec<[Tensor; 8]>,
    w_u: Tensor,
    b_u: Tensor,
    n_heads: usize,
    d_head: usize,
    scale: f64,
}

impl Candle {
    fn load(path: &Path, n_layers: usize, n_heads: usize, d_head: usize, scale: f64) -> Self {
        let dev = Device::Cpu;
        let t = candle_core::safetensors::load(path, &dev).expect("safetensors");
        let get = |k: &str| t[k].clone();
        let d_attn = n_heads * d_head;
        // [n_heads, d_model, d_head] -> [d_model, n_heads * d_head]
        let proj = |k: &str| {
            let w = get(k);
            let d_model = w.dim(1).unwrap();
            w.transpose(0, 1)
                .unwrap()
                .contiguous()
                .unwrap()
                .reshape((d_model, d_attn))
                .unwrap()
        };
        let bias = |k: &str| get(k).reshape((1, d_attn)).unwrap();
        let layers = (0..n_layers)
            .map(|l| {
                let k = |s: &str| format!("blocks.{l}.attn.{s}");
                let w_o = get(&k("W_O"));
                let d_model = w_o.dim(2).unwrap();
                [
                    proj(&k("W_Q")),
                    bias(&k("b_Q")),
                    proj(&k("W_K")),
                    bias(&k("b_K")),
                    proj(&k("W_V")),
                    bias(&k("b_V")),
                    w_o.reshape((d_attn, d_model)).unwrap(),
                    get(&k("b_O")).reshape((1, d_model)).unwrap(),
                ]
            })
            .collect();
        Candle {
            w_e: get("embed.W_E"),
            w_pos: get("pos_embed.W_pos"),
            layers,
            w_u: get("unembed.W_U"),
            b_u: get("unembed.b_U").unsqueeze(0).unwrap(),
            n_heads,
            d_head,
            scale,
        }
    }

    /// Decodes `tokens` one at a time over a KV cache, returning the last logits.
    fn decode(&self, tokens: &[u32]) -> candle_core::Result<Tensor> {
        let (h, dh) = (self.n_heads, self.d_head);
        let mut cache: Vec<Option<(Tensor, Tensor)>> = vec![None; self.layers.len()];
        let mut logits = None;
        for (pos, &t) in tokens.iter().enumerate() {
            let mut x = (self.w_e.narrow(0, t as usize, 1)? + self.w_pos.narrow(0, pos, 1)?)?;
            for (w, kv) in self.layers.iter().zip(cache.iter_mut()) {
                let q = x.matmul(&w[0])?.broadcast_add(&w[1])?;
                let k = x.matmul(&w[2])?.broadcast_add(&w[3])?;
                let v = x.matmul(&w[4])?.broadcast_add(&w[5])?;
                // [1, h*dh] -> [h, 1, dh]
                let split = |t: Tensor| t.reshape((h, 1, dh))?.contiguous();
                let (q, k, v) = (split(q)?, split(k)?, split(v)?);
                let (k, v) = match kv.take() {
                    None => (k, v),
                    Some((pk, pv)) => (Tensor::cat(&[&pk, &k], 1)?, Tensor::cat(&[&pv, &v], 1)?),
                };
                let scores = (q.matmul(&k.t()?)? / self.scale)?;
                let pattern = candle_nn::ops::softmax(&scores, D::Minus1)?;
                let z = pattern.matmul(&v)?.reshape((1, h * dh))?;
                *kv = Some((k, v));
                x = (x + z.matmul(&w[6])?.broadcast_add(&w[7])?)?;
            }
            logits = Some(x.matmul(&self.w_u)?.broadcast_add(&self.b_u)?);
        }
        logits.ok_or_else(|| candle_core::Error::Msg("no tokens".into()))
    }
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
    let candle = Candle::load(
        &dir.join("induction-2l.safetensors"),
        cfg.n_layers,
        cfg.n_heads,
        cfg.d_head,
        cfg.layer_attn_scale(0) as f64,
    );
    group.bench_function("decode_1_thread/candle", |b| {
        b.iter(|| {
            for s in &seqs {
                std::hint::black_box(candle.decode(s).expect("candle decodes"));
            }
        })
    });
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
