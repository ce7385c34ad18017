//! What the fuzz targets share: hostile hooks, a few steps of a session, re-signing a mutated blob, and
//! arbitrary configs and models written with the core's blob writer; the targets themselves
//! ([`targets`]) and the mutations the replay test makes ([`mutate`]).

pub mod mutate;
pub mod targets;

use arbitrary::{Result, Unstructured};
use microlens::blob::{self, Activations, Processing, TensorData, PREAMBLE_LEN};
use microlens::config::{MAX_DIM, MAX_LAYERS};
use microlens::tensors::Catalogue;
use microlens::{
    ActFn, Config, DType, HookKind, HookPoint, Hooks, KvCache, Model, Normalization, Positional,
    Session,
};

/// Largest KV cache plus workspace a target allocates (`f32` words): bigger models are only parsed.
const MAX_WORDS: usize = 1 << 22;

/// Values a hostile hook writes: non-finite, huge, tiny, negative.
const NASTY: [f32; 10] = [
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::MAX,
    f32::MIN,
    f32::MIN_POSITIVE,
    1e-45,
    -0.0,
    1e30,
    -1.0,
];

/// Hooks that overwrite activations with [`NASTY`] values, chosen by the fuzz input.
pub struct HostileHooks {
    script: Vec<u8>,
    at: usize,
}

impl HostileHooks {
    /// Hooks driven by `script` (cycled).
    pub fn new(script: &[u8]) -> Self {
        HostileHooks {
            script: script.to_vec(),
            at: 0,
        }
    }
    fn next(&mut self) -> u8 {
        if self.script.is_empty() {
            return 0;
        }
        let b = self.script[self.at % self.script.len()];
        self.at = self.at.wrapping_add(1);
        b
    }
}

impl Hooks for HostileHooks {
    fn wants(&self, kind: HookKind) -> bool {
        let k = kind as usize;
        self.script
            .get(k % self.script.len().max(1))
            .is_some_and(|b| b & 1 == 1)
    }
    fn hook(&mut self, _: HookPoint, act: &mut [f32]) {
        let op = self.next();
        if act.is_empty() || op & 3 == 0 {
            return;
        }
        let i = self.next() as usize % act.len();
        let v = NASTY[self.next() as usize % NASTY.len()];
        if op & 3 == 1 {
            act[i] = v;
        } else {
            act.iter_mut().for_each(|x| *x = v);
        }
    }
}

/// Runs up to four tokens from `data` (some out of range) through `model`, with hostile hooks after the
/// first step: errors are fine, panics are not. Models too big to allocate are skipped.
pub fn exercise(model: &Model<'_>, data: &[u8]) {
    let _ = model.features();
    let _ = model.entries().count();
    let positions = model.config().n_ctx.min(4);
    let kv_len = model.kv_cache_len_at(positions);
    let ws_len = model.workspace_len_at(positions);
    if kv_len.saturating_add(ws_len) > MAX_WORDS {
        return;
    }
    let (mut kv, mut ws) = (vec![0.0f32; kv_len], vec![0.0f32; ws_len]);
    let Ok(mut session) = Session::with_context(model, positions, &mut kv, &mut ws) else {
        return;
    };
    let d_vocab = model.config().d_vocab as u32;
    let mut hooks = HostileHooks::new(data);
    for (i, &b) in data.iter().take(positions + 1).enumerate() {
        let token = if b == 0xff {
            u32::MAX
        } else {
            u32::from(b) % d_vocab.max(1)
        };
        let r = if i == 0 {
            session.step(token).map(|_| ())
        } else {
            session.step_with(token, &mut hooks).map(|_| ())
        };
        if r.is_err() {
            break;
        }
    }
}

/// Makes a mutated blob pass the preamble and CRC checks: magic, version, flags 0, the body length and
/// the CRC of the body as they now are (the header length stays as mutated).
pub fn resign(bytes: &mut Vec<u8>) {
    if bytes.len() < PREAMBLE_LEN {
        bytes.resize(PREAMBLE_LEN, 0);
    }
    bytes[..4].copy_from_slice(&blob::MAGIC);
    bytes[4..6].copy_from_slice(&blob::VERSION.to_le_bytes());
    bytes[6..8].copy_from_slice(&[0, 0]);
    let body_len = (bytes.len() - PREAMBLE_LEN) as u32;
    bytes[12..16].copy_from_slice(&body_len.to_le_bytes());
    let crc = blob::crc32(&bytes[PREAMBLE_LEN..]);
    bytes[16..20].copy_from_slice(&crc.to_le_bytes());
}

/// A dimension: usually small, sometimes at or past the limits.
fn dim(u: &mut Unstructured<'_>, small: usize) -> Result<usize> {
    Ok(if u.ratio(1, 8)? {
        *u.choose(&[
            0,
            1,
            255,
            256,
            257,
            MAX_DIM - 1,
            MAX_DIM,
            MAX_DIM + 1,
            1 << 31,
            1 << 32,
            usize::MAX,
        ])?
    } else {
        u.int_in_range(1..=small)?
    })
}

fn float(u: &mut Unstructured<'_>) -> Result<f32> {
    Ok(if u.ratio(1, 8)? {
        *u.choose(&NASTY)?
    } else {
        f32::from(u.int_in_range(-64i8..=64)?) / 16.0
    })
}

/// An arbitrary config: every option, dimensions small or at the limits (valid or not).
pub fn config(u: &mut Unstructured<'_>) -> Result<Config> {
    let n_layers = if u.ratio(1, 16)? {
        *u.choose(&[0, MAX_LAYERS, MAX_LAYERS + 1])?
    } else {
        u.int_in_range(1..=3)?
    };
    let d_head = dim(u, 8)?;
    let mut cfg = Config::new(
        n_layers,
        dim(u, 12)?,
        dim(u, 3)?,
        d_head,
        dim(u, 16)?,
        dim(u, 8)?,
        if u.arbitrary()? {
            Some(dim(u, 16)?)
        } else {
            None
        },
    );
    cfg.d_vocab_out = if u.arbitrary()? {
        cfg.d_vocab
    } else {
        dim(u, 16)?
    };
    cfg.act_fn = *u.choose(&ActFn::ALL)?;
    cfg.normalization = *u.choose(&Normalization::ALL)?;
    cfg.positional = match u.int_in_range(0..=3)? {
        0 => Positional::Standard,
        1 => Positional::Shortformer,
        2 => Positional::Sinusoidal,
        _ => Positional::Rotary {
            dim: if u.ratio(3, 4)? {
                2 * u.int_in_range(1..=d_head.clamp(2, 8) / 2)?
            } else {
                dim(u, 8)?
            },
            base: if u.ratio(3, 4)? { 10000.0 } else { float(u)? },
            adjacent_pairs: u.arbitrary()?,
        },
    };
    if u.ratio(1, 8)? {
        cfg.attn_scale = float(u)?;
    }
    cfg.scale_attn_by_inverse_layer_idx = u.arbitrary()?;
    if u.ratio(1, 8)? {
        cfg.eps = float(u)?;
    }
    Ok(cfg)
}

/// Every size computation of the core on `cfg`, valid or not: must not panic.
pub fn sizes(cfg: &Config) {
    let _ = cfg.validate();
    let _ = cfg.d_attn();
    let _ = microlens::Workspace::len(cfg);
    for act in Activations::ALL {
        let _ = KvCache::len(cfg, act);
        let _ = KvCache::len(&cfg.with_context(4), act);
    }
    let _ = microlens::analysis::PatternRecorder::len(cfg.n_layers, cfg.n_heads, cfg.n_ctx);
}

/// Elements of every tensor of a valid `cfg`, or `None` past `limit`.
pub fn n_values(cfg: &Config, limit: usize) -> Option<usize> {
    Catalogue::new(cfg).ids().try_fold(0usize, |acc, id| {
        let [r, c] = id.shape(cfg);
        let n = acc.checked_add(r.checked_mul(c)?)?;
        (n <= limit).then_some(n)
    })
}

/// Matrix `id` encoded as `dtype` from `values` (vectors stay `f32`), or `None` if not encodable.
fn encode_tensor(
    id: microlens::TensorId,
    shape: [usize; 2],
    values: &[f32],
    dtype: DType,
) -> Option<TensorData> {
    let dtype = if id.kind.is_matrix() {
        dtype
    } else {
        DType::F32
    };
    TensorData::encode_nearest(id, shape, values, dtype)
}

/// A model of `cfg` (valid, at most a few thousand values) with weights and dtypes from `u`, written
/// with the blob writer; `None` if a value cannot be encoded.
pub fn model_bytes(u: &mut Unstructured<'_>, cfg: &Config) -> Result<Option<Vec<u8>>> {
    let dtype = *u.choose(DType::ALL.as_slice())?;
    let mut activations = *u.choose(&Activations::ALL)?;
    // The integer-only arithmetic: int8 or int4 matrices and a plan of arbitrary words (with int4, its
    // units too), where the config is one it takes (else the int8 arithmetic).
    let covered = microlens::integer::plan::check_config(cfg).is_ok();
    if activations == Activations::Integer && !covered {
        activations = Activations::I8;
    }
    let integer = activations == Activations::Integer;
    // Drawn only for the integer arithmetic: other inputs decode as before.
    let integer_dtype = match integer && u.arbitrary()? {
        true => DType::I4,
        false => DType::I8,
    };
    let mut tensors = Vec::new();
    for id in Catalogue::new(cfg).ids() {
        let shape = id.shape(cfg);
        let values: Vec<f32> = (0..shape[0] * shape[1])
            .map(|_| float(u).map(|v| if v.is_finite() { v } else { 0.5 }))
            .collect::<Result<_>>()?;
        let per_tensor = if integer {
            integer_dtype
        } else if u.ratio(1, 4)? {
            *u.choose(DType::ALL.as_slice())?
        } else {
            dtype
        };
        match encode_tensor(id, shape, &values, per_tensor) {
            Some(t) => tensors.push(t),
            None => return Ok(None),
        }
    }
    let processing = Processing {
        fold_ln: u.arbitrary()?,
        center_writing_weights: u.arbitrary()?,
        center_unembed: u.arbitrary()?,
        fold_value_biases: u.arbitrary()?,
        original_normalization: cfg.normalization,
    };
    let Ok(bytes) = blob::write(cfg, processing, activations, &tensors) else {
        return Ok(None);
    };
    if !integer {
        return Ok(Some(bytes));
    }
    let mut plan = microlens::integer::plan::MAGIC.to_le_bytes().to_vec();
    let int4 = integer_dtype == DType::I4;
    plan.resize(microlens::integer::plan::len_of(cfg, int4), 0);
    u.fill_buffer(&mut plan[4..])?;
    Ok(blob::with_arithmetic(&bytes, activations, Some(&plan)).ok())
}
