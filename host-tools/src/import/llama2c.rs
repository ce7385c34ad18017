//! llama2.c checkpoints (`.bin`, the layouts its `export.py` writes), read into a [`Config`] and the
//! weights of a LLaMA-shaped model ([`LinearWeights`]).
//!
//! * legacy (version 0): seven little-endian `i32` — `dim, hidden_dim, n_layers, n_heads, n_kv_heads,
//!   vocab_size, seq_len`, the vocabulary negative when the classifier is not the embedding — then the
//!   `f32` tensors kind by kind, every layer of a kind together: `W_E`, attention norms, `wq`, `wk`,
//!   `wv`, `wo`, MLP norms, `w1` (gate), `w2` (down), `w3` (up), the final norm, the rotary cos and sin
//!   tables (`[seq_len, head_size / 2]` each, not needed: the model computes them), the classifier;
//! * version 1: a 256-byte header (magic `0x616b3432`, version, the seven fields, a shared-classifier
//!   byte, zeros), then the norms, `W_E`, the matrices and the classifier, all `f32`;
//! * version 2 (`Q8_0`): the header also holds the `i32` group size; the norms in `f32`, then every
//!   matrix as `i8` in groups of that many consecutive values, then all their `f32` scales in the same
//!   order: `w = q * scale`, read here as those `f32` products (which `convert` then rounds to
//!   microlens's own int8 or any other storage type).
//!
//! Matrices are `nn.Linear` weights, the blob layout. llama2.c rotates adjacent pairs of each head
//! (TransformerLens's `rotary_adjacent_pairs`), with base 10000, RMSNorm eps 1e-5, SwiGLU. The parser is
//! bounded: the header's dimensions are checked and the exact length they imply is computed (checked
//! arithmetic) and compared with the file's before anything is allocated.

use std::path::Path;

use anyhow::{ensure, Context, Result};
use microlens::config::{MAX_DIM, MAX_LAYERS};
use microlens::{ActFn, Config, Normalization, Positional, TensorId, TensorKind};

use crate::import::llama::LinearWeights;

/// The first four bytes of a version 1 or 2 file (`"ak42"` as a little-endian `u32`).
pub const MAGIC: u32 = 0x616b_3432;
/// Bytes of the version 1 and 2 headers.
pub const HEADER_LEN: usize = 256;
/// Bytes of the legacy header.
const LEGACY_HEADER_LEN: usize = 28;

/// A llama2.c checkpoint read.
#[derive(Clone, Debug, PartialEq)]
pub struct Llama2c {
    /// `export.py`'s version: 0 (legacy), 1 (`f32`) or 2 (`Q8_0`).
    pub version: u32,
    /// The architecture, as TransformerLens would describe it.
    pub config: Config,
    /// `Q8_0`'s group size (version 2).
    pub group_size: Option<usize>,
    /// Whether the classifier is the token embedding.
    pub shared_classifier: bool,
    /// The weights, in blob layout.
    pub weights: LinearWeights,
}

/// The header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    version: u32,
    dim: usize,
    hidden: usize,
    n_layers: usize,
    n_heads: usize,
    n_kv_heads: usize,
    vocab: usize,
    seq_len: usize,
    shared: bool,
    group: Option<usize>,
    /// Where the tensors start.
    data: usize,
}

fn i32_at(b: &[u8], at: usize) -> Result<i32> {
    let bytes = b
        .get(at..at + 4)
        .context("llama2.c checkpoint: truncated header")?;
    Ok(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Whether `bytes` start like a version 1 or 2 llama2.c file.
pub fn has_magic(bytes: &[u8]) -> bool {
    bytes.get(..4) == Some(&MAGIC.to_le_bytes()[..])
}

impl Header {
    fn parse(b: &[u8]) -> Result<Self> {
        let (version, fields_at, data) = match has_magic(b) {
            true => (i32_at(b, 4)?, 8, HEADER_LEN),
            false => (0, 0, LEGACY_HEADER_LEN),
        };
        ensure!(
            (0..=2).contains(&version),
            "llama2.c checkpoint version {version} is not supported (0, 1 or 2)"
        );
        let mut f = [0i32; 7];
        for (i, v) in f.iter_mut().enumerate() {
            *v = i32_at(b, fields_at + 4 * i)?;
        }
        let names = [
            "dim",
            "hidden_dim",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "vocab_size",
            "seq_len",
        ];
        let (shared, vocab) = match version {
            0 => (f[5] > 0, f[5].unsigned_abs() as i64),
            _ => {
                let flag = *b.get(36).context("llama2.c checkpoint: truncated header")?;
                ensure!(
                    flag <= 1,
                    "llama2.c checkpoint: shared-classifier flag {flag} is not 0 or 1"
                );
                (flag == 1, f[5] as i64)
            }
        };
        let mut dims = [0usize; 7];
        for (i, (&v, name)) in f.iter().zip(names).enumerate() {
            let v = if i == 5 { vocab } else { v as i64 };
            let max = if i == 2 { MAX_LAYERS } else { MAX_DIM };
            ensure!(
                v > 0 && v as usize <= max,
                "llama2.c checkpoint: {name} = {v} is not in 1..={max}"
            );
            dims[i] = v as usize;
        }
        let [dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len] = dims;
        ensure!(
            dim % n_heads == 0 && (dim / n_heads) % 2 == 0,
            "llama2.c checkpoint: dim {dim} is not n_heads {n_heads} heads of an even size"
        );
        ensure!(
            n_kv_heads <= n_heads && n_heads % n_kv_heads == 0,
            "llama2.c checkpoint: n_kv_heads {n_kv_heads} does not divide n_heads {n_heads}"
        );
        let group = match version {
            2 => {
                let g = i32_at(b, 37)?;
                ensure!(
                    g > 0 && g as usize <= MAX_DIM,
                    "llama2.c checkpoint: Q8_0 group size {g} is not positive"
                );
                Some(g as usize)
            }
            _ => None,
        };
        Ok(Header {
            version: version as u32,
            dim,
            hidden,
            n_layers,
            n_heads,
            n_kv_heads,
            vocab,
            seq_len,
            shared,
            group,
            data,
        })
    }

    fn config(&self) -> Config {
        let d_head = self.dim / self.n_heads;
        let mut cfg = Config::new(
            self.n_layers,
            self.dim,
            self.n_heads,
            d_head,
            self.vocab,
            self.seq_len,
            Some(self.hidden),
        );
        cfg.act_fn = ActFn::Silu;
        cfg.normalization = Normalization::RMS;
        cfg.positional = Positional::Rotary {
            dim: d_head,
            base: 10000.0,
            adjacent_pairs: true,
        };
        cfg.n_key_value_heads = self.n_kv_heads;
        cfg.gated_mlp = true;
        cfg
    }

    /// Every tensor in file order: `(kind, per-layer, values per layer)`, the rotary tables as
    /// `None` (legacy only).
    fn parts(&self) -> Vec<(Option<TensorKind>, bool, usize)> {
        let (d, f, v) = (self.dim, self.hidden, self.vocab);
        let kv = self.n_kv_heads * (d / self.n_heads);
        let matrix = |k| (Some(k), true);
        let norms = [
            (Some(TensorKind::Ln1W), true, d),
            (Some(TensorKind::Ln2W), true, d),
            (Some(TensorKind::LnFinalW), false, d),
        ];
        let [m_q, m_k, m_v, m_o, m_1, m_2, m_3] = [
            (matrix(TensorKind::WQ), d * d),
            (matrix(TensorKind::WK), kv * d),
            (matrix(TensorKind::WV), kv * d),
            (matrix(TensorKind::WO), d * d),
            (matrix(TensorKind::WGate), f * d),
            (matrix(TensorKind::WOut), d * f),
            (matrix(TensorKind::WIn), f * d),
        ]
        .map(|((k, l), n)| (k, l, n));
        let embed = (Some(TensorKind::WE), false, v * d);
        let classifier = (!self.shared).then_some((Some(TensorKind::WU), false, v * d));
        let mut parts = match self.version {
            0 => vec![
                embed,
                norms[0],
                m_q,
                m_k,
                m_v,
                m_o,
                norms[1],
                m_1,
                m_2,
                m_3,
                norms[2],
                (None, false, self.seq_len * (d / self.n_heads)),
            ],
            _ => vec![
                norms[0], norms[1], norms[2], embed, m_q, m_k, m_v, m_o, m_1, m_2, m_3,
            ],
        };
        parts.extend(classifier);
        parts
    }

    /// Values of a part over its layers (checked).
    fn values(&self, per_layer: bool, n: usize) -> Result<usize> {
        let layers = if per_layer { self.n_layers } else { 1 };
        n.checked_mul(layers)
            .context("llama2.c checkpoint: sizes overflow")
    }

    /// The file length the header implies.
    fn expected_len(&self) -> Result<usize> {
        let overflow = || anyhow::anyhow!("llama2.c checkpoint: sizes overflow");
        let mut len = self.data;
        for (kind, per_layer, n) in self.parts() {
            let values = self.values(per_layer, n)?;
            let bytes = match (self.group, kind) {
                (Some(g), Some(k)) if k.is_matrix() => {
                    ensure!(
                        values % g == 0,
                        "llama2.c checkpoint: {} values of {k:?} are not whole Q8_0 groups of {g}",
                        values
                    );
                    values.checked_add(values / g * 4).ok_or_else(overflow)?
                }
                _ => values.checked_mul(4).ok_or_else(overflow)?,
            };
            len = len.checked_add(bytes).ok_or_else(overflow)?;
        }
        Ok(len)
    }
}

/// The length of the llama2.c file whose first bytes (at least [`HEADER_LEN`], or the whole file if
/// shorter) are `head`.
pub fn declared_len(head: &[u8]) -> Result<usize> {
    Header::parse(head)?.expected_len()
}

/// Reads a llama2.c checkpoint file: its header first, then exactly the length that declares.
pub fn read_file(path: &Path) -> Result<Llama2c> {
    let bytes = crate::io::files::read_declared(path, HEADER_LEN, declared_len)?;
    parse(&bytes).with_context(|| format!("checkpoint {}", path.display()))
}

/// `f32`s from little-endian bytes.
fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Parses a whole llama2.c checkpoint.
pub fn parse(bytes: &[u8]) -> Result<Llama2c> {
    let header = Header::parse(bytes)?;
    let expected = header.expected_len()?;
    ensure!(
        bytes.len() == expected,
        "llama2.c checkpoint is {} bytes, its header (version {}) declares {expected}",
        bytes.len(),
        header.version
    );
    let mut at = header.data;
    let mut take = |n: usize| {
        let s = &bytes[at..at + n];
        at += n;
        s
    };
    let mut weights = LinearWeights::default();
    let mut quantised = Vec::new();
    for (kind, per_layer, n) in header.parts() {
        let values = header.values(per_layer, n)?;
        let Some(kind) = kind else {
            take(4 * values); // legacy rotary tables
            continue;
        };
        if header.group.is_some() && kind.is_matrix() {
            quantised.push((kind, per_layer, n, take(values)));
            continue;
        }
        insert(&mut weights, kind, per_layer, n, floats(take(4 * values)));
    }
    if let Some(g) = header.group {
        for (kind, per_layer, n, q) in quantised {
            let scales = floats(take(q.len() / g * 4));
            ensure!(
                scales.iter().all(|s| s.is_finite()),
                "llama2.c checkpoint: a Q8_0 scale of {kind:?} is not finite"
            );
            let values = q
                .iter()
                .enumerate()
                .map(|(i, &v)| v as i8 as f32 * scales[i / g])
                .collect();
            insert(&mut weights, kind, per_layer, n, values);
        }
    }
    Ok(Llama2c {
        version: header.version,
        config: header.config(),
        group_size: header.group,
        shared_classifier: header.shared,
        weights,
    })
}

/// Splits a part's values by layer into `weights`.
fn insert(weights: &mut LinearWeights, kind: TensorKind, per_layer: bool, n: usize, v: Vec<f32>) {
    match per_layer {
        true => {
            for (l, chunk) in v.chunks_exact(n).enumerate() {
                weights.insert(TensorId::layer(kind, l), chunk.to_vec());
            }
        }
        false => weights.insert(TensorId::global(kind), v),
    }
}

/// Whether `path` is read as a llama2.c checkpoint: a `.bin` file, or one starting with [`MAGIC`].
pub fn is_llama2c(path: &Path) -> bool {
    let magic = || {
        let mut head = [0u8; 4];
        std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
            .is_ok_and(|()| has_magic(&head))
    };
    path.extension().is_some_and(|e| e == "bin") || magic()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: i32, fields: [i32; 7], shared: u8, group: i32) -> Vec<u8> {
        let mut b = Vec::new();
        if version > 0 {
            b.extend(MAGIC.to_le_bytes());
            b.extend(version.to_le_bytes());
        }
        fields.iter().for_each(|f| b.extend(f.to_le_bytes()));
        if version > 0 {
            b.push(shared);
            b.extend(group.to_le_bytes());
            b.resize(HEADER_LEN, 0);
        }
        b
    }

    const TINY: [i32; 7] = [8, 12, 1, 2, 1, 5, 3];

    #[test]
    fn every_layout_reads_back_what_it_holds() {
        // One layer, dim 8, 2 heads of 4, 1 kv head, hidden 12, vocab 5, seq 3: values 0, 1, 2, ...
        for version in 0..=2 {
            let mut fields = TINY;
            fields[5] = if version == 0 { -5 } else { 5 };
            let mut b = header(version, fields, 0, 4);
            let h = Header::parse(&b).unwrap();
            let mut k = 0.0f32;
            let mut scales = Vec::new();
            for (kind, per_layer, n) in h.parts() {
                let values = h.values(per_layer, n).unwrap();
                if version == 2 && kind.is_some_and(TensorKind::is_matrix) {
                    b.extend((0..values).map(|i| (i % 7) as u8));
                    scales.extend((0..values / 4).flat_map(|_| 0.5f32.to_le_bytes()));
                } else {
                    (0..values).for_each(|_| {
                        b.extend(k.to_le_bytes());
                        k += 1.0;
                    });
                }
            }
            b.extend(scales);
            let m = parse(&b).unwrap();
            assert_eq!(m.version, version as u32);
            assert!(!m.shared_classifier);
            let cfg = m.config;
            assert_eq!((cfg.n_heads, cfg.n_key_value_heads, cfg.d_head), (2, 1, 4));
            let sd = m.weights.into_state_dict(&cfg).unwrap();
            assert_eq!(sd.get("blocks.0.attn.W_K").unwrap().shape, vec![1, 8, 4]);
            assert_eq!(sd.get("blocks.0.mlp.W_gate").unwrap().shape, vec![8, 12]);
            let w_u = &sd.get("unembed.W_U").unwrap().data;
            match version {
                // `W_U[c][v] = classifier[v][c]`: the last part, after 2 * 8 + 8 + ... values.
                2 => assert_eq!(w_u[1], 0.5 * ((8 % 7) as f32)),
                _ => assert_eq!(w_u[0] + 8.0, w_u[1]),
            }
            assert!(parse(&b[..b.len() - 1])
                .unwrap_err()
                .to_string()
                .contains("declares"));
        }
    }

    /// The fixture's llama2.c files hold the HF checkpoint's weights: the same values (each head's
    /// `W_Q`/`W_K` columns in adjacent-pairs order), and the `Q8_0` file within half a step of them.
    #[test]
    fn fixture_files_hold_the_hf_weights() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hf_llama");
        let cfg = crate::import::tl_config::load(&dir.join("config.json"))
            .unwrap()
            .config;
        let hf = crate::import::load(&dir.join("model.safetensors"), &cfg).unwrap();
        let d = cfg.d_head;
        // Pairs order `[x0, y0, x1, y1, ..]` from halves order `[x0, x1, .., y0, y1, ..]`.
        let pairs = |name: &str, t: &[f32]| -> Vec<f32> {
            if !(name.ends_with("W_Q") || name.ends_with("W_K")) {
                return t.to_vec();
            }
            let mut out = t.to_vec();
            for (o, row) in out.chunks_exact_mut(d).zip(t.chunks_exact(d)) {
                for i in 0..d / 2 {
                    (o[2 * i], o[2 * i + 1]) = (row[i], row[d / 2 + i]);
                }
            }
            out
        };
        for version in 0..3 {
            let m = read_file(&dir.join(format!("llama2c_v{version}.bin"))).unwrap();
            assert_eq!(m.version, version);
            let mut want = cfg;
            want.positional = Positional::Rotary {
                dim: d,
                base: 10000.0,
                adjacent_pairs: true,
            };
            assert_eq!(m.config, want);
            let sd = m.weights.into_state_dict(&m.config).unwrap();
            for (name, t) in hf.iter() {
                let ours = &sd.get(name).unwrap().data;
                let theirs = pairs(name, &t.data);
                let max = theirs.iter().fold(0f32, |m, x| m.max(x.abs()));
                let tol = if version == 2 {
                    max / 127.0 * 0.5001
                } else {
                    0.0
                };
                let diff = ours
                    .iter()
                    .zip(&theirs)
                    .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                assert!(diff <= tol, "v{version} {name}: {diff} > {tol}");
            }
        }
    }

    #[test]
    fn bad_headers_are_one_line_errors() {
        let cases: [(Vec<u8>, &str); 6] = [
            (header(3, TINY, 0, 4), "version 3"),
            (header(1, [8, 12, 1, 3, 1, 5, 3], 0, 4), "n_heads 3"),
            (header(1, [8, 12, 1, 2, 3, 5, 3], 0, 4), "n_kv_heads 3"),
            (header(1, [8, 12, 0, 2, 1, 5, 3], 0, 4), "n_layers = 0"),
            (header(1, TINY, 2, 4), "flag 2"),
            (header(2, TINY, 0, 5), "Q8_0 groups of 5"),
        ];
        for (bytes, want) in cases {
            let err = Header::parse(&bytes)
                .and_then(|h| h.expected_len())
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err:?} lacks {want:?}");
            assert!(!err.contains('\n'));
        }
        let huge = header(1, [1 << 20, 1 << 20, 256, 1, 1, 1 << 20, 1], 0, 0);
        let len = declared_len(&huge).unwrap();
        assert!(parse(&huge)
            .unwrap_err()
            .to_string()
            .contains(&len.to_string()));
    }
}
