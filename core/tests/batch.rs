//! The batch path: a session built with `Session::with_rows` runs positions together, layer by
//! layer, and computes every logit and every hook point of every position with the bits of
//! `Session::step_with` position by position, for every architecture, storage type and activation
//! arithmetic, with and without the host's blocked weights and hooks, for run lengths that do and do
//! not divide the sequence; errors stop a run where a step-by-step loop stops.

mod common;

use common::{random_blob_as, small_config};
use microlens::host::HostWeights;
use microlens::{
    Activations, Config, DType, Error, HookKind, HookPoint, Hooks, Model, Normalization,
    Positional, Session,
};

/// Every hook call: the point and the bits it saw.
type Calls = Vec<(HookPoint, Vec<u32>)>;

/// Records every point (so every point is wanted: `hook_result`'s head-by-head output projection,
/// the normalised pattern) and writes at a few: zeroes head 1's `z` at position 3, scales
/// `resid_mid` of layer 0 at position 5 and `mlp_post` at position 2, adds to the keys at 4.
#[derive(Default)]
struct Record {
    calls: Calls,
    /// Only these kinds wanted (all if `None`).
    only: Option<Vec<HookKind>>,
}

impl Hooks for Record {
    fn wants(&self, kind: HookKind) -> bool {
        self.only.as_ref().is_none_or(|k| k.contains(&kind))
    }

    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        match (p.kind, p.layer, p.head, p.pos) {
            (HookKind::Z, _, 1, 3) => act.fill(0.0),
            (HookKind::ResidMid, 0, _, 5) | (HookKind::MlpPost, _, _, 2) => {
                act.iter_mut().for_each(|x| *x *= 0.75)
            }
            (HookKind::K, 1, 0, 4) => act.iter_mut().for_each(|x| *x += 0.5),
            _ => {}
        }
        self.calls
            .push((p, act.iter().map(|x| x.to_bits()).collect()));
    }
}

/// Logits (bits) of `tokens` through a session of `rows` rows (`0`: `step_with` one by one), and
/// each position's hook calls in the order they came.
fn logits(model: &Model<'_>, tokens: &[u32], rows: usize, hooks: &mut Record) -> Vec<Vec<u32>> {
    let n_ctx = model.config().n_ctx;
    let mut kv = vec![0.0; model.kv_cache_len()];
    let mut ws = vec![0.0; model.workspace_len_rows(n_ctx, rows.max(1))];
    let mut out = vec![];
    let bits = |l: &[f32]| l.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    if rows == 0 {
        let mut s = Session::new(model, &mut kv, &mut ws).unwrap();
        for &t in tokens {
            out.push(bits(s.step_with(t, hooks).unwrap()));
        }
    } else {
        let mut s = Session::with_rows(model, n_ctx, rows, &mut kv, &mut ws).unwrap();
        s.run(tokens, hooks, |pos, l| {
            assert_eq!(pos, out.len());
            out.push(bits(l))
        })
        .unwrap();
        assert_eq!(s.pos(), tokens.len());
    }
    out
}

/// Each position's calls, in call order.
fn by_position(calls: &Calls, n: usize) -> Vec<Calls> {
    (0..n)
        .map(|p| calls.iter().filter(|c| c.0.pos == p).cloned().collect())
        .collect()
}

fn configs() -> Vec<Config> {
    let rotary = Positional::Rotary {
        dim: 8,
        base: 10000.0,
        adjacent_pairs: false,
    };
    let mut out = vec![small_config()];
    for (normalization, positional, d_mlp) in [
        (Normalization::LN, Positional::Standard, Some(48)),
        (Normalization::RMS, rotary, Some(40)),
        (Normalization::LNPre, Positional::Shortformer, None),
        (Normalization::None, Positional::Sinusoidal, Some(32)),
    ] {
        out.push(Config {
            normalization,
            positional,
            d_mlp,
            ..Config::new(2, 32, 4, 8, 37, 11, d_mlp)
        });
    }
    out
}

#[test]
fn runs_of_positions_have_the_bits_of_steps() {
    let kinds = [
        (DType::F32, Activations::F32),
        (DType::F16, Activations::F32),
        (DType::I8, Activations::F32),
        (DType::I4, Activations::F32),
        (DType::I8, Activations::I8),
        (DType::I4, Activations::I8),
        (DType::I8, Activations::I16),
        (DType::I8G, Activations::F32),
        (DType::I8G, Activations::I8),
        (DType::I8G, Activations::I16Kv16),
    ];
    for (c, cfg) in configs().iter().enumerate() {
        let tokens: Vec<u32> = (0..cfg.n_ctx as u32)
            .map(|i| (i * 7 + 3) % cfg.d_vocab as u32)
            .collect();
        for &(dtype, act) in &kinds {
            let bytes = random_blob_as(cfg, 40 + c as u64, dtype, act);
            let plain = Model::from_bytes(&bytes).unwrap();
            let host = HostWeights::new(&plain);
            for model in [plain, plain.with_host(&host)] {
                let what = format!("{cfg:?} {dtype:?} {act:?}");
                let only = [HookKind::Z, HookKind::MlpPost, HookKind::ResidMid];
                for hooks in [None, Some(None), Some(Some(only.to_vec()))] {
                    let record = || Record {
                        only: hooks.clone().flatten(),
                        ..Record::default()
                    };
                    let (mut want_hooks, mut unhooked) = (record(), Record::default());
                    let want = match hooks {
                        Some(_) => logits(&model, &tokens, 0, &mut want_hooks),
                        None => logits(&model, &tokens, 0, &mut unhooked),
                    };
                    for rows in [1, 2, 3, 4, 5, 8, 16] {
                        let mut got_hooks = record();
                        let got = match hooks {
                            Some(_) => logits(&model, &tokens, rows, &mut got_hooks),
                            None => logits(&model, &tokens, rows, &mut Record::default()),
                        };
                        assert_eq!(got, want, "{what} rows {rows} hooks {hooks:?}");
                        let n = tokens.len();
                        assert_eq!(
                            by_position(&got_hooks.calls, n),
                            by_position(&want_hooks.calls, n),
                            "{what} rows {rows} hook calls"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_run_stops_where_steps_stop() {
    let cfg = small_config();
    let bytes = random_blob_as(&cfg, 3, DType::F32, Activations::F32);
    let model = Model::from_bytes(&bytes).unwrap();
    let n_ctx = cfg.n_ctx;
    let mut kv = vec![0.0; model.kv_cache_len()];
    let mut ws = vec![0.0; model.workspace_len_rows(n_ctx, 4)];
    let mut s = Session::with_rows(&model, n_ctx, 4, &mut kv, &mut ws).unwrap();
    // A bad token at position 6: positions 0..6 are computed, then the error.
    let mut seen = vec![];
    let tokens = [1, 2, 3, 4, 5, 6, 23, 7];
    let err = s.run(&tokens, &mut (), |pos, _| seen.push(pos));
    assert_eq!(
        err,
        Err(Error::TokenOutOfRange {
            token: 23,
            d_vocab: 23
        })
    );
    assert_eq!((seen, s.pos()), ((0..6).collect::<Vec<_>>(), 6));
    // The context fills: the tokens that fit, then the error.
    let mut seen = 0;
    let err = s.run(&[1; 20], &mut (), |_, _| seen += 1);
    assert_eq!(err, Err(Error::ContextFull { n_ctx }));
    assert_eq!((seen, s.pos()), (n_ctx - 6, n_ctx));
    // Too small a workspace for the rows asked for, and no rows at all.
    let mut small = vec![0.0; model.workspace_len_rows(n_ctx, 4) - 1];
    let mut kv = vec![0.0; model.kv_cache_len()];
    assert!(matches!(
        Session::with_rows(&model, n_ctx, 4, &mut kv, &mut small),
        Err(Error::BufferTooSmall { .. })
    ));
    assert!(Session::with_rows(&model, n_ctx, 0, &mut kv, &mut ws).is_err());
    assert_eq!(model.workspace_len_rows(n_ctx, 1), model.workspace_len());
}
