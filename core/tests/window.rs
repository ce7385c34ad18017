//! The sliding window: at every token, the logits of a fresh session over the window ending there, bit
//! for bit, for every positional scheme, storage type and width.

mod common;

use common::{random_blob_as, run, Lcg};
use microlens::analysis::{Head, HeadAblation};
use microlens::{
    Activations, Config, DType, Error, Hooks, Model, Normalization, Positional, Session, Window,
    WindowMode,
};

const ROTARY: Positional = Positional::Rotary {
    dim: 4,
    base: 10000.0,
    adjacent_pairs: false,
};

fn config(positional: Positional, n_layers: usize) -> Config {
    Config {
        positional,
        normalization: Normalization::LN,
        ..Config::new(n_layers, 16, 2, 8, 19, 7, Some(24))
    }
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// Steps `tokens` through a window of `width` with `hooks` and checks every position against a fresh
/// session over its window with `fresh_hooks` (a new one per window); returns the window's mode.
fn check<H: Hooks>(
    model: &Model<'_>,
    width: usize,
    cap: usize,
    tokens: &[u32],
    hooks: &mut H,
    fresh_hooks: &mut dyn FnMut() -> H,
) -> WindowMode {
    let (mut kv, mut ws) = (
        vec![0.0; model.kv_cache_len_at(cap)],
        vec![0.0; model.workspace_len_at(cap)],
    );
    let mut session = Session::with_context(model, cap, &mut kv, &mut ws).unwrap();
    let mut window_tokens = vec![0; width];
    let mut kept = vec![0.0; Window::kept_len(model.config(), width)];
    let mut window = Window::new(&mut session, width, &mut window_tokens, &mut kept).unwrap();
    for (t, &token) in tokens.iter().enumerate() {
        let got = bits(window.step_with(token, hooks).unwrap());
        let start = (t + 1).saturating_sub(width);
        let fresh = run(model, &tokens[start..=t], &mut fresh_hooks());
        assert_eq!(got, bits(fresh.last().unwrap()), "width {width} token {t}");
    }
    assert_eq!(window.seen(), tokens.len());
    window.mode()
}

fn random_tokens(n: usize, vocab: u32, seed: u64) -> Vec<u32> {
    let mut rng = Lcg(seed);
    (0..n).map(|_| rng.next_u32() % vocab).collect()
}

#[test]
fn every_position_equals_a_fresh_run_over_its_window() {
    let cases = [
        (Positional::Standard, 2, WindowMode::ReEncode),
        (Positional::Shortformer, 2, WindowMode::ReEncode),
        (Positional::Sinusoidal, 2, WindowMode::ReEncode),
        (ROTARY, 2, WindowMode::ReEncode),
        (ROTARY, 1, WindowMode::Restore),
        (
            Positional::Rotary {
                dim: 8,
                base: 500.0,
                adjacent_pairs: true,
            },
            1,
            WindowMode::Restore,
        ),
    ];
    for (i, (positional, layers, mode)) in cases.into_iter().enumerate() {
        let cfg = config(positional, layers);
        for (dtype, act) in [(DType::F32, Activations::F32), (DType::I8, Activations::I8)] {
            let bytes = random_blob_as(&cfg, 40 + i as u64, dtype, act);
            let model = Model::from_bytes(&bytes).unwrap();
            let tokens = random_tokens(3 * cfg.n_ctx + 2, 19, i as u64);
            for width in [1, 3, cfg.n_ctx] {
                let got = check(&model, width, cfg.n_ctx, &tokens, &mut (), &mut || ());
                assert_eq!(got, mode, "{positional:?}");
            }
            // A session capped below the model's context slides too.
            check(&model, 4, 5, &tokens, &mut (), &mut || ());
        }
    }
}

#[test]
fn hooks_see_what_a_fresh_run_shows_them() {
    let heads = [Head { layer: 0, head: 1 }];
    for (positional, layers) in [(Positional::Sinusoidal, 2), (ROTARY, 1)] {
        let cfg = config(positional, layers);
        let bytes = random_blob_as(&cfg, 5, DType::F32, Activations::F32);
        let model = Model::from_bytes(&bytes).unwrap();
        let tokens = random_tokens(20, 19, 9);
        let ablated = check(
            &model,
            4,
            cfg.n_ctx,
            &tokens,
            &mut HeadAblation::zero(&heads),
            &mut || HeadAblation::zero(&heads),
        );
        assert_eq!(ablated, WindowMode::of(&cfg));
        // The ablation changes the logits: the comparison above is not vacuous.
        let plain = run(&model, &tokens[..4], &mut ());
        let cut = run(&model, &tokens[..4], &mut HeadAblation::zero(&heads));
        assert_ne!(plain, cut);
    }
}

#[test]
fn bad_widths_buffers_and_tokens_are_errors_that_lose_nothing() {
    let cfg = config(ROTARY, 1);
    let bytes = random_blob_as(&cfg, 1, DType::F32, Activations::F32);
    let model = Model::from_bytes(&bytes).unwrap();
    let (mut kv, mut ws) = (
        vec![0.0; model.kv_cache_len()],
        vec![0.0; model.workspace_len()],
    );
    let mut tokens = vec![0; 16];
    let mut kept = vec![0.0; Window::kept_len(&cfg, 16)];
    for width in [0, cfg.n_ctx + 1] {
        let mut session = Session::new(&model, &mut kv, &mut ws).unwrap();
        let err = Window::new(&mut session, width, &mut tokens, &mut kept).unwrap_err();
        assert_eq!(
            err,
            Error::OutOfRange {
                what: "window width"
            }
        );
    }
    let mut session = Session::new(&model, &mut kv, &mut ws).unwrap();
    let short = &mut kept[..Window::kept_len(&cfg, 3) - 1];
    let err = Window::new(&mut session, 3, &mut tokens, short).unwrap_err();
    assert!(matches!(err, Error::BufferTooSmall { .. }));
    let err = Window::new(&mut session, 3, &mut tokens[..2], &mut kept).unwrap_err();
    assert!(matches!(err, Error::BufferTooSmall { .. }));

    // A bad token in the middle of a stream changes nothing.
    let stream = random_tokens(12, 19, 4);
    let mut window = Window::new(&mut session, 3, &mut tokens, &mut kept).unwrap();
    for (t, &token) in stream.iter().enumerate() {
        if t == 6 {
            let err = window.step(19).unwrap_err();
            assert_eq!(
                err,
                Error::TokenOutOfRange {
                    token: 19,
                    d_vocab: 19
                }
            );
        }
        let got = bits(window.step(token).unwrap());
        let fresh = run(&model, &stream[(t + 1).saturating_sub(3)..=t], &mut ());
        assert_eq!(got, bits(fresh.last().unwrap()), "token {t}");
    }
    window.reset();
    assert_eq!(window.seen(), 0);
    assert_eq!(
        bits(window.step(stream[0]).unwrap()),
        bits(&run(&model, &stream[..1], &mut ())[0])
    );
}
