//! The core API handed hostile numbers: sizes that overflow `usize` (on 32-bit targets too), lengths that
//! point past the blob. Every case is a typed error or `None`, never a panic or a wrapped size.

mod common;

use common::{random_blob, run};
use microlens::analysis::PatternRecorder;
use microlens::blob::{crc32, declared_len, MAGIC, PREAMBLE_LEN, VERSION};
use microlens::config::{MAX_DIM, MAX_LAYERS};
use microlens::{Activations, Config, Error, KvCache, Model, Normalization, Positional, Session};

/// `a * b * ...` in `u128`, or `usize::MAX` where it does not fit a `usize`.
fn product(factors: &[usize]) -> usize {
    let p: u128 = factors.iter().map(|&f| f as u128).product();
    usize::try_from(p).unwrap_or(usize::MAX)
}

#[test]
fn item16_pattern_recorder_sizes_do_not_overflow() {
    // `1 << 32` as the issue wrote it; `usize::MAX` where usize is 32 bits.
    let two_32 = (1u64 << 32).min(usize::MAX as u64) as usize;
    assert!(PatternRecorder::new(&mut [], 0, 1, 1, two_32).is_none());
    assert!(PatternRecorder::new(&mut [], 0, 1, 1, usize::MAX).is_none());
    assert!(PatternRecorder::new(&mut [0.0; 4], 0, usize::MAX, usize::MAX, 2).is_none());
    assert_eq!(PatternRecorder::len(1, 1, usize::MAX), usize::MAX);
    assert_eq!(PatternRecorder::len(2, 3, 4), 96);
    assert_eq!(PatternRecorder::len(0, 3, usize::MAX), 0);
}

/// A body of `body_len` zero bytes signed with its CRC, whose preamble claims `header_len`.
fn preamble_claiming(header_len: u32, body_len: usize) -> std::vec::Vec<u8> {
    let body = vec![0u8; body_len];
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&header_len.to_le_bytes());
    out.extend_from_slice(&(body_len as u32).to_le_bytes());
    out.extend_from_slice(&crc32(&body).to_le_bytes());
    assert_eq!(out.len(), PREAMBLE_LEN);
    out.extend_from_slice(&body);
    out
}

#[test]
fn item16_blob_parse_checks_the_header_length_before_adding() {
    for header_len in [u32::MAX, u32::MAX - PREAMBLE_LEN as u32 + 1, 1 << 31, 33] {
        let bytes = preamble_claiming(header_len, 32);
        assert!(
            matches!(Model::from_bytes(&bytes), Err(Error::Inconsistent(_))),
            "header_len {header_len}"
        );
    }
    // A header exactly filling the body decodes (or not) without reading past it.
    let bytes = preamble_claiming(32, 32);
    assert!(Model::from_bytes(&bytes).is_err());
    assert_eq!(declared_len(&bytes).unwrap(), PREAMBLE_LEN + 32);
    assert!(matches!(
        declared_len(&[0; PREAMBLE_LEN]),
        Err(Error::BadMagic)
    ));
}

/// The largest config `validate` accepts in every size: its KV cache is 2^49 words.
fn widest() -> Config {
    let mut cfg = Config::new(
        MAX_LAYERS,
        MAX_DIM,
        1,
        MAX_DIM,
        MAX_DIM,
        MAX_DIM,
        Some(MAX_DIM),
    );
    cfg.normalization = Normalization::LN;
    cfg
}

#[test]
fn item03_kv_cache_len_never_wraps() {
    let cfg = widest();
    cfg.validate().unwrap();
    let per_side = [cfg.n_layers, cfg.n_ctx, cfg.d_attn()];
    assert_eq!(
        KvCache::len(&cfg, Activations::F32),
        product(&[2, product(&per_side)])
    );
    let i8 = KvCache::len(&cfg, Activations::I8);
    assert!(i8 >= product(&[2, product(&per_side)]) / 4, "{i8}");
    // The workspace of the widest config fits comfortably in a 32-bit usize.
    assert!(microlens::Workspace::len(&cfg) < 1 << 26);
}

#[test]
fn item03_max_dim_keeps_single_dimensions_and_products_of_two_in_range() {
    // MAX_DIM's promise: a sum of a few dozen dimensions (the workspace), or n_layers times one, fits a
    // 32-bit `usize`; products of two dimensions or more are checked (a matrix's length) or saturate.
    assert!(64 * MAX_DIM as u64 <= u64::from(u32::MAX));
    assert!(MAX_LAYERS as u64 * MAX_DIM as u64 <= u64::from(u32::MAX));
    let mut square = Config::new(1, MAX_DIM, 1, MAX_DIM, MAX_DIM, MAX_DIM, None);
    square.normalization = Normalization::None;
    square.validate().unwrap();
    let w_e = square.d_vocab as u64 * square.d_model as u64;
    let len = microlens::DType::F32.data_len(square.d_vocab, square.d_model);
    assert_eq!(
        len.map(|n| n as u64),
        usize::try_from(4 * w_e).ok().map(|n| n as u64)
    );
}

#[test]
fn item03_a_session_for_fewer_positions_than_n_ctx() {
    let mut cfg = Config::new(2, 8, 2, 4, 11, 64, None);
    cfg.normalization = Normalization::None;
    cfg.positional = Positional::Standard;
    let bytes = random_blob(&cfg, 5);
    let model = Model::from_bytes(&bytes).unwrap();
    let tokens = [1, 4, 2, 9, 3];
    let full = run(&model, &tokens, &mut ());
    for act in [Activations::F32, Activations::I8] {
        let words = KvCache::len(&cfg.with_context(tokens.len()), act);
        assert!(words < KvCache::len(&cfg, act) / 10, "{words}");
    }
    let mut kv = vec![0.0; model.kv_cache_len_at(tokens.len())];
    let mut ws = vec![0.0; model.workspace_len_at(tokens.len())];
    let mut session = Session::with_context(&model, tokens.len(), &mut kv, &mut ws).unwrap();
    let mut short = vec![];
    session
        .run(&tokens, &mut (), |_, l| short.push(l.to_vec()))
        .unwrap();
    assert_eq!(short, full, "the same logits, bit for bit");
    assert!(matches!(
        session.step(1),
        Err(Error::ContextFull { n_ctx: 5 })
    ));
    // More positions than the context is refused, not clamped.
    let mut kv = vec![0.0; model.kv_cache_len()];
    assert!(Session::with_context(&model, 65, &mut kv, &mut ws).is_err());
}
