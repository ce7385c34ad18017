//! Quantised models: round trips per dtype, the W8A8 path against the float model, a committed hash of
//! the integer path, the int8 KV cache, hooks, and corrupt scales and dtypes.

mod common;

use common::{encode_matrix, random_blob_as, run, small_config, Lcg};
use microlens::blob::{
    Activations, TensorEntry, ENTRY_LEN, PREAMBLE_LEN, ROW_SUM_BYTES, SCALE_BYTES,
};
use microlens::{
    Config, DType, Error, HookKind, HookPoint, Hooks, Inconsistency, KvCache, Model, Session,
    TensorId, TensorKind,
};

fn logits(blob: &[u8], tokens: &[u32]) -> Vec<Vec<f32>> {
    run(&Model::from_bytes(blob).unwrap(), tokens, &mut ())
}

fn log_softmax(x: &[f32]) -> Vec<f64> {
    let max = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let lse = max + x.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
    x.iter().map(|&v| v as f64 - lse).collect()
}

/// Mean KL(p || q) over positions and the fraction of positions with the same arg-max.
fn kl_and_top1(p: &[Vec<f32>], q: &[Vec<f32>]) -> (f64, f64) {
    let argmax = |x: &[f32]| (0..x.len()).max_by(|&a, &b| x[a].total_cmp(&x[b])).unwrap();
    let (mut kl, mut same) = (0.0, 0);
    for (p, q) in p.iter().zip(q) {
        let (lp, lq) = (log_softmax(p), log_softmax(q));
        kl += lp
            .iter()
            .zip(&lq)
            .map(|(a, b)| a.exp() * (a - b))
            .sum::<f64>();
        same += (argmax(p) == argmax(q)) as usize;
    }
    (kl / p.len() as f64, same as f64 / p.len() as f64)
}

/// FNV-1a 64 over the little-endian bytes of every logit, position by position (`microlens run --hash`).
fn logits_hash(positions: &[Vec<f32>]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in positions.iter().flatten().flat_map(|v| v.to_le_bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The small test config with a context long enough for [`PROMPT`].
fn tame_config() -> Config {
    let mut cfg = small_config();
    cfg.d_vocab = 40;
    cfg.d_vocab_out = 40;
    cfg.n_ctx = 24;
    cfg
}

const PROMPT: [u32; 20] = [
    3, 17, 29, 8, 3, 17, 29, 8, 0, 39, 12, 5, 12, 5, 21, 33, 3, 17, 29, 8,
];

#[test]
fn quantised_matrices_round_trip_within_their_step() {
    let cfg = tame_config();
    let mut rng = Lcg(11);
    let (rows, cols) = (7, 70);
    let values: Vec<f32> = (0..rows * cols).map(|_| 3.0 * rng.uniform()).collect();
    let id = TensorId::global(TensorKind::WU);
    for dtype in DType::ALL {
        let t = encode_matrix(id, [rows, cols], &values, dtype);
        let mut worst = 0.0f32;
        let m = matrix_of(&t, &cfg);
        for r in 0..rows {
            let row = &values[r * cols..(r + 1) * cols];
            let mut back = vec![0.0; cols];
            m.matrix(id).unwrap().row_into(r, &mut back);
            for (c, (&w, &b)) in row.iter().zip(&back).enumerate() {
                // Half a quantisation step of the value's row (i8) or group (i4); f16 rounds to 11 bits.
                let bound = match dtype {
                    DType::F32 => 0.0,
                    DType::F16 => w.abs() * 2f32.powi(-11),
                    DType::I8 => 0.5 * t.scales[r],
                    DType::I4 => 0.5 * t.scales[r * cols.div_ceil(32) + c / 32],
                    DType::I8G => 0.5 * t.scales[r * cols.div_ceil(8) + c / 8],
                };
                assert!(
                    (w - b).abs() <= bound * 1.0001,
                    "{dtype:?} r{r} c{c}: {w} -> {b}"
                );
                worst = worst.max((w - b).abs() / 3.0);
            }
        }
        let limit = match dtype {
            DType::F32 => 0.0,
            DType::F16 => 1.0 / 2048.0,
            DType::I8 | DType::I8G => 0.5 / 127.0,
            DType::I4 => 0.5 / 7.0,
        };
        assert!(worst <= limit, "{dtype:?}: worst relative error {worst}");
    }
}

/// A model of `cfg` whose `W_U` is `t` and everything else zero, to read `t` back through the core.
fn matrix_of(t: &microlens::blob::TensorData, cfg: &Config) -> OwnedModel {
    let mut cfg = *cfg;
    cfg.d_vocab_out = t.shape[0];
    cfg.d_model = t.shape[1];
    cfg.d_head = 1;
    cfg.n_heads = 1;
    cfg.n_key_value_heads = 1;
    let tensors: Vec<_> = microlens::tensors::Catalogue::new(&cfg)
        .ids()
        .map(|id| {
            if id == t.id {
                t.clone()
            } else {
                let [r, c] = id.shape(&cfg);
                encode_matrix(id, [r, c], &vec![0.0; r * c], DType::F32)
            }
        })
        .collect();
    OwnedModel(
        microlens::blob::write(
            &cfg,
            microlens::blob::Processing::none(cfg.normalization),
            Activations::F32,
            &tensors,
        )
        .unwrap(),
    )
}

struct OwnedModel(Vec<u8>);

impl OwnedModel {
    fn matrix(&self, id: TensorId) -> Option<microlens::weights::Matrix<'_>> {
        Model::from_bytes(&self.0).unwrap().matrix(id)
    }
}

#[test]
fn quantised_models_track_the_float_model() {
    let cfg = tame_config();
    let reference = logits(
        &random_blob_as(&cfg, 5, DType::F32, Activations::F32),
        &PROMPT,
    );
    let cases = [
        (DType::F16, Activations::F32, 1e-6, 1.0),
        (DType::I8, Activations::F32, 1e-3, 0.95),
        (DType::I8, Activations::I8, 1e-3, 0.95),
        (DType::I4, Activations::I8, 5e-2, 0.8),
        (DType::I8, Activations::I16, 1e-3, 0.95),
        (DType::I8, Activations::I16Kv16, 1e-3, 0.95),
        (DType::I4, Activations::I16, 5e-2, 0.8),
        (DType::I8G, Activations::F32, 1e-3, 0.95),
        (DType::I8G, Activations::I8, 1e-3, 0.95),
        (DType::I8G, Activations::I16, 1e-3, 0.95),
        (DType::I8G, Activations::I16Kv16, 1e-3, 0.95),
    ];
    for (dtype, act, max_kl, min_top1) in cases {
        let got = logits(&random_blob_as(&cfg, 5, dtype, act), &PROMPT);
        let (kl, top1) = kl_and_top1(&reference, &got);
        println!("{dtype:?} {act:?}: mean KL {kl:.3e}, top-1 {top1:.3}");
        assert!(
            kl <= max_kl && top1 >= min_top1,
            "{dtype:?} {act:?}: KL {kl}, top-1 {top1}"
        );
    }
}

/// The logits hash of the integer paths for [`PROMPT`]: the same bits on every target (the firmware
/// prints these too). A change here is a change of the quantised arithmetic.
#[test]
fn integer_path_logits_hash_is_committed() {
    let cfg = tame_config();
    let hash = |dtype| {
        let blob = random_blob_as(&cfg, 5, dtype, Activations::I8);
        format!("{:016x}", logits_hash(&logits(&blob, &PROMPT)))
    };
    assert_eq!(hash(DType::I8), "359efee7e659ae12");
    assert_eq!(hash(DType::I4), "4412eeaf3a9e87ba");
    assert_eq!(hash(DType::I8G), "ca56e1b407ebec96");
}

#[test]
fn int8_kv_cache_is_a_quarter_plus_one_scale_per_head() {
    let cfg = tame_config();
    let f32_words = KvCache::len(&cfg, Activations::F32);
    let i8_words = KvCache::len(&cfg, Activations::I8);
    let scales = 2 * cfg.n_layers * cfg.n_ctx * cfg.n_heads;
    assert_eq!(i8_words, f32_words / 4 + scales);
    let blob = random_blob_as(&cfg, 5, DType::I8, Activations::I8);
    let model = Model::from_bytes(&blob).unwrap();
    let mut kv = vec![0.0; i8_words - 1];
    let mut ws = vec![0.0; model.workspace_len()];
    assert!(matches!(
        Session::new(&model, &mut kv, &mut ws),
        Err(Error::BufferTooSmall { .. })
    ));
}

/// W8A16: int16 inputs and queries cost almost nothing beyond the int8 weights (the model with `f32`
/// activations), and an int16 KV cache less than the int8 one.
#[test]
fn int16_activations_follow_the_int8_weights_closely() {
    let cfg = tame_config();
    let weights_only = logits(
        &random_blob_as(&cfg, 5, DType::I8, Activations::F32),
        &PROMPT,
    );
    let kl = |act| {
        let got = logits(&random_blob_as(&cfg, 5, DType::I8, act), &PROMPT);
        kl_and_top1(&weights_only, &got).0
    };
    let (a8, a16, kv16) = (
        kl(Activations::I8),
        kl(Activations::I16),
        kl(Activations::I16Kv16),
    );
    println!(
        "against W8 with f32 activations: A8 {a8:.3e}, A16 {a16:.3e}, A16 + int16 KV {kv16:.3e}"
    );
    assert!(
        a16 < a8 / 2.0 && kv16 < a16 && kv16 < 1e-7,
        "{a8} {a16} {kv16}"
    );
}

#[test]
fn int16_kv_cache_is_half_plus_one_scale_per_head() {
    let cfg = tame_config();
    let f32_words = KvCache::len(&cfg, Activations::F32);
    let scales = 2 * cfg.n_layers * cfg.n_ctx * cfg.n_heads;
    assert_eq!(
        KvCache::len(&cfg, Activations::I16),
        KvCache::len(&cfg, Activations::I8)
    );
    assert_eq!(
        KvCache::len(&cfg, Activations::I16Kv16),
        f32_words / 2 + scales
    );
}

#[test]
fn int8_sessions_step_reset_and_rerun_identically() {
    let cfg = tame_config();
    let blob = random_blob_as(&cfg, 9, DType::I8, Activations::I8);
    let model = Model::from_bytes(&blob).unwrap();
    let whole = run(&model, &PROMPT, &mut ());
    let (mut kv, mut ws) = (
        vec![0.0; model.kv_cache_len()],
        vec![0.0; model.workspace_len()],
    );
    let mut s = Session::new(&model, &mut kv, &mut ws).unwrap();
    for round in 0..2 {
        for (i, &t) in PROMPT.iter().enumerate() {
            assert_eq!(s.step(t).unwrap(), &whole[i][..], "round {round} pos {i}");
        }
        s.reset();
    }
}

/// Reads every hook point (asking for `hook_result` or not), optionally zeroing one pattern row.
struct Probe {
    result: bool,
    seen: Vec<(HookPoint, Vec<f32>)>,
    zero_pattern_at: Option<usize>,
}

impl Hooks for Probe {
    fn wants(&self, kind: HookKind) -> bool {
        kind != HookKind::Result || self.result
    }
    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        if p.kind == HookKind::Pattern && Some(p.pos) == self.zero_pattern_at && p.layer == 0 {
            act.iter_mut().for_each(|a| *a = 0.0);
            act[0] = 1.0;
        }
        self.seen.push((p, act.to_vec()));
    }
}

#[test]
fn hooks_see_f32_values_and_their_writes_are_used() {
    let cfg = tame_config();
    let blob = random_blob_as(&cfg, 5, DType::I8, Activations::I8);
    let model = Model::from_bytes(&blob).unwrap();
    let plain = run(&model, &PROMPT, &mut ());
    let mut probe = Probe {
        result: false,
        seen: vec![],
        zero_pattern_at: None,
    };
    assert_eq!(
        run(&model, &PROMPT, &mut probe),
        plain,
        "reading hooks change nothing"
    );
    let patterns = probe
        .seen
        .iter()
        .filter(|(p, _)| p.kind == HookKind::Pattern);
    for (p, row) in patterns {
        let sum: f32 = row.iter().sum();
        assert!(
            (sum - 1.0).abs() < 1e-5 && row.len() == p.pos + 1,
            "{p}: {row:?}"
        );
    }
    let v = probe
        .seen
        .iter()
        .find(|(p, _)| p.kind == HookKind::V)
        .unwrap();
    assert!(
        v.1.iter().any(|x| x.fract() != 0.0),
        "hook_v sees f32 values"
    );

    let mut per_head = Probe {
        result: true,
        seen: vec![],
        zero_pattern_at: None,
    };
    let (kl, top1) = kl_and_top1(&plain, &run(&model, &PROMPT, &mut per_head));
    assert!(kl < 1e-9 && top1 == 1.0, "per-head W_O: KL {kl}");

    let mut ablate = Probe {
        result: false,
        seen: vec![],
        zero_pattern_at: Some(10),
    };
    let ablated = run(&model, &PROMPT, &mut ablate);
    assert_eq!(ablated[..10], plain[..10]);
    assert_ne!(ablated[10], plain[10], "a pattern write is used");
}

/// Byte offset in the blob of tensor entry `index` of the header's table.
fn entry_offset(blob: &[u8], model: &Model<'_>, index: usize) -> usize {
    let e = model.entries().nth(index).unwrap().encode().unwrap();
    let header_end = PREAMBLE_LEN + u32::from_le_bytes(blob[8..12].try_into().unwrap()) as usize;
    (PREAMBLE_LEN..header_end - ENTRY_LEN)
        .find(|&at| blob[at..at + ENTRY_LEN] == e)
        .unwrap()
}

fn resign(bytes: &mut [u8]) {
    let crc = microlens::blob::crc32(&bytes[PREAMBLE_LEN..]);
    bytes[16..20].copy_from_slice(&crc.to_le_bytes());
}

/// Byte offset in the blob of the data section.
fn data_start(blob: &[u8]) -> usize {
    let header_end = PREAMBLE_LEN + u32::from_le_bytes(blob[8..12].try_into().unwrap()) as usize;
    header_end.next_multiple_of(microlens::blob::ALIGN)
}

#[test]
fn corrupt_scales_are_rejected() {
    let cfg = tame_config();
    for dtype in [DType::I8, DType::I4, DType::I8G] {
        let blob = random_blob_as(&cfg, 5, dtype, Activations::I8);
        let model = Model::from_bytes(&blob).unwrap();
        let base = data_start(&blob);
        let (index, e): (usize, TensorEntry) = model
            .entries()
            .enumerate()
            .find(|(_, e)| e.kind == TensorKind::WK)
            .unwrap();
        let n_scales = e.scales_len as usize / SCALE_BYTES;
        for bad in [f32::NAN, f32::INFINITY, 0.0, -0.0, -1.0, f32::NEG_INFINITY] {
            for which in [0, n_scales - 1] {
                let mut b = blob.clone();
                let at = base + e.scales_offset as usize + SCALE_BYTES * which;
                b[at..at + 2].copy_from_slice(&half::f16::from_f32(bad).to_le_bytes());
                resign(&mut b);
                assert_eq!(
                    Model::from_bytes(&b).unwrap_err(),
                    Error::Inconsistent(Inconsistency::Scale { index }),
                    "{dtype:?} scale {which} = {bad}"
                );
            }
        }
    }
}

#[test]
fn corrupt_dtypes_are_rejected() {
    let cfg = tame_config();
    let blob = random_blob_as(&cfg, 5, DType::I8, Activations::I8);
    let model = Model::from_bytes(&blob).unwrap();
    // The dtype is the fourth byte of an entry: kind (1), layer (2, fixed width), dtype (1).
    let dtype_at = |index| entry_offset(&blob, &model, index) + 3;
    let corrupt = |index: usize, byte: u8| {
        let mut b = blob.clone();
        b[dtype_at(index)] = byte;
        resign(&mut b);
        Model::from_bytes(&b).unwrap_err()
    };
    let find = |kind| model.entries().position(|e| e.kind == kind).unwrap();
    let (w_q, b_q) = (find(TensorKind::WQ), find(TensorKind::BQ));
    for unknown in [5u8, 0x7f, 0xff] {
        assert_eq!(
            corrupt(w_q, unknown),
            Error::BadHeader,
            "dtype byte {unknown}"
        );
    }
    for other in [0u8, 1, 3, 4] {
        assert_eq!(
            corrupt(w_q, other),
            Error::Inconsistent(Inconsistency::Length { index: w_q }),
            "i8 matrix relabelled {other}"
        );
    }
    for quantised in [1u8, 2, 3, 4] {
        assert_eq!(
            corrupt(b_q, quantised),
            Error::Inconsistent(Inconsistency::DType { index: b_q }),
            "vector relabelled {quantised}"
        );
    }
    // The activations byte sits just before the table's varint length prefix.
    let table_len = model.n_tensors() * ENTRY_LEN;
    let prefix = 1 + (table_len >= 128) as usize + (table_len >= 1 << 14) as usize;
    let mut act = blob.clone();
    act[entry_offset(&blob, &model, 0) - prefix - 1] = 7;
    resign(&mut act);
    assert_eq!(Model::from_bytes(&act).unwrap_err(), Error::BadHeader);
}

/// The blob `blob` with entry `index`'s declared scale bytes changed by `delta` (the data untouched),
/// re-signed.
fn with_scales_len(blob: &[u8], model: &Model<'_>, index: usize, delta: i64) -> Vec<u8> {
    let at = entry_offset(blob, model, index) + 24;
    let mut b = blob.to_vec();
    let len = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let len = u32::try_from(i64::from(len) + delta).unwrap();
    b[at..at + 4].copy_from_slice(&len.to_le_bytes());
    resign(&mut b);
    b
}

#[test]
fn stored_row_sums_give_the_bits_of_summing_the_rows() {
    // An int8 `W_out` stores its rows' exact sums after its scales (the centred hidden vector's
    // correction); a blob whose entry does not declare them (as blobs before them) sums the rows
    // every token instead: the same logits, bit for bit, in both integer activations.
    let cfg = tame_config();
    for activations in [Activations::I8, Activations::I16] {
        let blob = random_blob_as(&cfg, 9, DType::I8, activations);
        let model = Model::from_bytes(&blob).unwrap();
        let (index, e) = model
            .entries()
            .enumerate()
            .find(|(_, e)| e.kind == TensorKind::WOut)
            .unwrap();
        let rows = e.rows as usize;
        assert_eq!(e.scales_len as usize, rows * (SCALE_BYTES + ROW_SUM_BYTES));
        let w = model.matrix(TensorId::layer(TensorKind::WOut, 0)).unwrap();
        assert!(w.has_row_sums());
        let bare = with_scales_len(&blob, &model, index, -(4 * rows as i64));
        let bare_model = Model::from_bytes(&bare).unwrap();
        let w = bare_model
            .matrix(TensorId::layer(TensorKind::WOut, 0))
            .unwrap();
        assert!(!w.has_row_sums());
        let (stored, summed) = (
            run(&model, &PROMPT, &mut ()),
            run(&bare_model, &PROMPT, &mut ()),
        );
        let bits =
            |l: &[Vec<f32>]| -> Vec<u32> { l.iter().flatten().map(|v| v.to_bits()).collect() };
        assert_eq!(bits(&stored), bits(&summed), "{activations:?}");
        // The stored sums are what the forward pass reads: a wrong one changes the logits.
        let mut wrong = blob.clone();
        let sum_at = data_start(&blob) + (e.scales_offset + e.scales_len) as usize - 4;
        wrong[sum_at] ^= 0x40;
        resign(&mut wrong);
        let wrong_model = Model::from_bytes(&wrong).unwrap();
        assert_ne!(bits(&run(&wrong_model, &PROMPT, &mut ())), bits(&stored));
        // Anything but no sums or one per row is refused.
        for delta in [-4, 4, -(2 * rows as i64)] {
            assert_eq!(
                Model::from_bytes(&with_scales_len(&blob, &model, index, delta)).unwrap_err(),
                Error::Inconsistent(Inconsistency::Length { index }),
                "{delta}"
            );
        }
    }
}
