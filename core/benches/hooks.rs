//! No hooks cost nothing: a forward over a whole context with `()` hooks, against the same forward built
//! with every hook call compiled out (`MICROLENS_HOOK_POINTS=""`: no hook point in the build, see
//! `microlens::hooks::COMPILED`). Compare the two builds with criterion's baselines (from the workspace
//! root):
//!
//! ```text
//! MICROLENS_HOOK_POINTS= cargo bench -p microlens --features std,encode --bench hooks -- --save-baseline stripped
//! cargo bench -p microlens --features std,encode --bench hooks -- --baseline stripped
//! ```
//!
//! On a busy machine wall-clock noise can exceed the difference looked for; the same binaries then also
//! count instructions, which load does not change: with `MICROLENS_BENCH_PASSES=N` set, a binary runs `N`
//! forward passes, prints the fastest, and exits (under `valgrind --tool=cachegrind`, compare `I refs`).

use std::hint::black_box;

use criterion::{criterion_group, Criterion};
use microlens::{Config, Model, Session};

/// The core tests' random models.
#[path = "../tests/common/mod.rs"]
mod common;

/// A tiny GPT-2-like model: 2 layers, d_model 64, 4 heads, MLP 256, vocabulary 512, context 64.
fn config() -> Config {
    Config::new(2, 64, 4, 16, 512, 64, Some(256))
}

/// One forward pass over the whole context with `()` hooks (`step`), from position 0.
fn forward_pass(session: &mut Session<'_, '_>, tokens: &[u32]) -> f32 {
    session.reset();
    let mut last = 0.0;
    for &t in tokens {
        last = session.step(black_box(t)).expect("in range")[0];
    }
    last
}

/// Builds the model and hands a session and the tokens to `f`.
fn with_session<R>(f: impl FnOnce(&mut Session<'_, '_>, &[u32]) -> R) -> R {
    let cfg = config();
    let bytes = common::random_blob(&cfg, 1);
    let model = Model::from_bytes(&bytes).expect("valid blob");
    let (mut kv, mut ws) = (
        vec![0.0; model.kv_cache_len()],
        vec![0.0; model.workspace_len()],
    );
    let mut session = Session::new(&model, &mut kv, &mut ws).expect("buffers");
    let tokens: Vec<u32> = (0..cfg.n_ctx as u32).map(|i| (i * 37 + 11) % 512).collect();
    f(&mut session, &tokens)
}

fn forward(c: &mut Criterion) {
    with_session(|session, tokens| {
        c.bench_function("forward_64_tokens_no_hooks", |b| {
            b.iter(|| black_box(forward_pass(session, tokens)))
        });
    });
}

criterion_group!(benches, forward);

fn main() {
    if let Some(n) = std::env::var("MICROLENS_BENCH_PASSES")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
    {
        // Also the fastest pass: on a shared machine the minimum is the least disturbed figure.
        let (sum, fastest) = with_session(|s, t| {
            (0..n).fold((0.0f32, f64::INFINITY), |(sum, fastest), _| {
                let start = std::time::Instant::now();
                let x = forward_pass(s, t);
                (sum + x, fastest.min(start.elapsed().as_secs_f64()))
            })
        });
        println!(
            "{n} forward passes, fastest {:.1} us, checksum {sum}",
            fastest * 1e6
        );
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
