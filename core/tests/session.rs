//! Decoding: step by step equals the whole sequence, buffers are checked, a full context is an error.

mod common;

use common::{random_blob, random_blob_as, run, small_config};
use microlens::{Activations, Config, DType, Error, Model, Normalization, Positional, Session};

fn run_all(model: &Model<'_>, tokens: &[u32]) -> Vec<Vec<f32>> {
    run(model, tokens, &mut ())
}

#[test]
fn step_equals_run_and_reset_starts_over() {
    let bytes = random_blob(&small_config(), 7);
    let model = Model::from_bytes(&bytes).unwrap();
    let tokens = [1, 5, 9, 2, 22, 0, 7];
    let whole = run_all(&model, &tokens);
    let (mut kv, mut ws) = (
        vec![0.0; model.kv_cache_len()],
        vec![0.0; model.workspace_len()],
    );
    let mut s = Session::new(&model, &mut kv, &mut ws).unwrap();
    for round in 0..2 {
        for (i, &t) in tokens.iter().enumerate() {
            assert_eq!(s.step(t).unwrap(), &whole[i][..], "round {round} pos {i}");
        }
        s.reset();
    }
}

#[test]
fn full_context_and_bad_tokens_are_errors() {
    let cfg = small_config();
    let bytes = random_blob(&cfg, 8);
    let model = Model::from_bytes(&bytes).unwrap();
    let (mut kv, mut ws) = (
        vec![0.0; model.kv_cache_len()],
        vec![0.0; model.workspace_len()],
    );
    let mut s = Session::new(&model, &mut kv, &mut ws).unwrap();
    assert_eq!(
        s.step(23).unwrap_err(),
        Error::TokenOutOfRange {
            token: 23,
            d_vocab: 23
        }
    );
    for _ in 0..cfg.n_ctx {
        s.step(1).unwrap();
    }
    assert_eq!(
        s.step(1).unwrap_err(),
        Error::ContextFull { n_ctx: cfg.n_ctx }
    );
}

#[test]
fn a_context_cap_is_a_run_time_limit_with_the_same_bits() {
    let cfg = small_config();
    for (dtype, act) in [(DType::F32, Activations::F32), (DType::I8, Activations::I8)] {
        let bytes = random_blob_as(&cfg, 12, dtype, act);
        let model = Model::from_bytes(&bytes).unwrap();
        let cap = cfg.n_ctx / 2;
        let tokens: Vec<u32> = (0..cap as u32).map(|i| i * 7 % 23).collect();
        let whole = run_all(&model, &tokens);
        let (mut kv, mut ws) = (
            vec![0.0; model.kv_cache_len_at(cap)],
            vec![0.0; model.workspace_len_at(cap)],
        );
        assert!(kv.len() < model.kv_cache_len() && ws.len() < model.workspace_len());
        let mut s = Session::with_context(&model, cap, &mut kv, &mut ws).unwrap();
        assert_eq!(s.n_ctx(), cap);
        for (i, &t) in tokens.iter().enumerate() {
            let logits = s.step(t).unwrap();
            let same = logits
                .iter()
                .zip(&whole[i])
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{dtype:?} pos {i}");
        }
        assert_eq!(s.step(1).unwrap_err(), Error::ContextFull { n_ctx: cap });
    }
    let bytes = random_blob(&cfg, 13);
    let model = Model::from_bytes(&bytes).unwrap();
    let (mut kv, mut ws) = (vec![0.0; 1 << 16], vec![0.0; 1 << 16]);
    for bad in [0, cfg.n_ctx + 1] {
        assert!(matches!(
            Session::with_context(&model, bad, &mut kv, &mut ws),
            Err(Error::OutOfRange { .. })
        ));
    }
}

#[test]
fn small_buffers_are_errors() {
    let bytes = random_blob(&small_config(), 9);
    let model = Model::from_bytes(&bytes).unwrap();
    let (mut kv, mut ws) = (
        vec![0.0; model.kv_cache_len()],
        vec![0.0; model.workspace_len() - 1],
    );
    assert!(matches!(
        Session::new(&model, &mut kv, &mut ws),
        Err(Error::BufferTooSmall {
            what: "workspace",
            ..
        })
    ));
    let (mut kv, mut ws) = (
        vec![0.0; model.kv_cache_len() - 1],
        vec![0.0; model.workspace_len()],
    );
    assert!(matches!(
        Session::new(&model, &mut kv, &mut ws),
        Err(Error::BufferTooSmall {
            what: "KV cache",
            ..
        })
    ));
}

#[test]
fn every_architecture_runs_to_finite_normalised_outputs() {
    let norms = Normalization::ALL;
    let positions = [
        Positional::Standard,
        Positional::Shortformer,
        Positional::Sinusoidal,
        Positional::Rotary {
            dim: 4,
            base: 10000.0,
            adjacent_pairs: false,
        },
        Positional::Rotary {
            dim: 8,
            base: 10000.0,
            adjacent_pairs: true,
        },
    ];
    for (i, (&normalization, &positional)) in norms
        .iter()
        .flat_map(|n| positions.iter().map(move |p| (n, p)))
        .enumerate()
    {
        for d_mlp in [None, Some(24)] {
            let cfg = Config {
                normalization,
                positional,
                d_mlp,
                ..Config::new(2, 16, 2, 8, 11, 6, d_mlp)
            };
            let bytes = random_blob(&cfg, i as u64);
            let model = Model::from_bytes(&bytes).unwrap();
            let out = run_all(&model, &[1, 2, 3, 1, 2, 3]);
            assert!(out.iter().flatten().all(|x| x.is_finite()), "{cfg:?}");
        }
    }
}
