//! Calibration for GPTQ: the input of every matrix that multiplies an activation, recorded by running a
//! model through the core's own `Session` with hooks on token sequences (by default random
//! repeated-segment sequences like `fidelity`'s, with another seed).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::eval::emulation::round_trip;
use anyhow::{ensure, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use microlens::weights::affine;
use microlens::{HookKind, HookKinds, HookPoint, Hooks, Model, Normalization};
use microlens::{TensorId, TensorKind};
use rayon::prelude::*;

use crate::eval::run::{check_sequences, DEFAULT_MAX_SEQ_LEN};
use crate::eval::sequences::induction_sequences;
use crate::io::tokens::read_token_file;

/// Which inputs GPTQ rounds each matrix against (`--calibration-inputs`); on the model's own, the errors
/// are compensated as [`super::compensation`] says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum CalibrationInputs {
    /// The float model's (plain GPTQ, every matrix on its own).
    Float,
    /// The model's own, in forward order: the inputs of the model quantised so far, as the device
    /// multiplies them, with its errors compensated.
    #[default]
    Quantized,
}

/// An activation that matrices read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatrixInput {
    /// The normalised residual stream of a block, read by its `W_Q`, `W_K` and `W_V`.
    Attn(usize),
    /// `z` of every head of a block, concatenated, read by its `W_O`.
    Z(usize),
    /// The normalised residual stream read by a block's `W_in`.
    MlpIn(usize),
    /// The activated hidden layer read by a block's `W_out`.
    MlpHidden(usize),
    /// The final normalised residual stream, read by `W_U`.
    Unembed,
}

impl MatrixInput {
    /// The activation matrix `id` multiplies; `None` for the lookup tables (`W_E`, `W_pos`, the
    /// shortformer `pos_Q`/`pos_K`) and for vectors.
    pub fn of(id: TensorId) -> Option<MatrixInput> {
        let l = id.layer;
        Some(match id.kind {
            TensorKind::WQ | TensorKind::WK | TensorKind::WV => MatrixInput::Attn(l),
            TensorKind::WO => MatrixInput::Z(l),
            TensorKind::WGate | TensorKind::WIn => MatrixInput::MlpIn(l),
            TensorKind::WOut => MatrixInput::MlpHidden(l),
            TensorKind::WU => MatrixInput::Unembed,
            _ => return None,
        })
    }
}

/// What a site's inputs are taken as: the float values, or their per-token int8 rounding (what the
/// device's integer kernels multiply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputPrecision {
    /// The `f32` activations.
    Float,
    /// The activations rounded per token to int8 and back (`s = max|x| / 127`), as int8-activation
    /// models multiply them.
    Int8,
}

impl InputPrecision {
    /// How a model computing with `activations` multiplies its matrix inputs (int16 rounding, at most
    /// 1/65534 of a vector's largest value, is taken as float).
    pub fn of(activations: microlens::Activations) -> InputPrecision {
        match activations {
            microlens::Activations::F32
            | microlens::Activations::I16
            | microlens::Activations::I16Kv16 => InputPrecision::Float,
            microlens::Activations::I8 | microlens::Activations::Integer => InputPrecision::Int8,
        }
    }
}

/// Where calibration tokens come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `sequences` random repeated-segment sequences of `n_ctx` tokens, at most 256 (as `fidelity` makes
    /// them).
    Random {
        /// How many.
        sequences: usize,
        /// Their seed.
        seed: u64,
    },
    /// One sequence per line of comma-separated token ids.
    File(PathBuf),
}

/// Default number of random calibration sequences.
pub const DEFAULT_SEQUENCES: usize = 256;
/// Default seed of the random calibration sequences (`fidelity` evaluates on seed 0).
pub const DEFAULT_SEED: u64 = 1;

impl Default for Source {
    fn default() -> Self {
        Source::Random {
            sequences: DEFAULT_SEQUENCES,
            seed: DEFAULT_SEED,
        }
    }
}

impl Source {
    /// The token sequences for `model`, checked against it (not empty, at most `n_ctx` long, every token
    /// below `d_vocab`).
    pub fn sequences(&self, model: &Model<'_>) -> Result<Vec<Vec<u32>>> {
        let cfg = model.config();
        let seqs = match self {
            Source::Random { sequences, seed } => {
                let len = cfg.n_ctx.min(DEFAULT_MAX_SEQ_LEN);
                check_sequences("--calibration-sequences", *sequences, len)?;
                induction_sequences(*sequences, len, cfg.d_vocab, *seed)
            }
            Source::File(path) => {
                let seqs = read_token_file(path).context("calibration tokens")?;
                for (i, s) in seqs.iter().enumerate() {
                    crate::eval::run::check_tokens(model, s).with_context(|| {
                        format!("calibration tokens {}:{}", path.display(), i + 1)
                    })?;
                }
                seqs
            }
        };
        Ok(seqs)
    }
}

/// The points the collector reads.
const KINDS: HookKinds = HookKinds::of(&[
    HookKind::ResidPre,
    HookKind::Ln1Normalized,
    HookKind::Z,
    HookKind::ResidMid,
    HookKind::Ln2Normalized,
    HookKind::MlpPost,
    HookKind::ResidPost,
    HookKind::LnFinalNormalized,
]);

/// Hooks that hand every matrix input of a forward step, with its site, to `sink`.
struct Collector<'a, 'm, F> {
    model: &'a Model<'m>,
    inputs: InputPrecision,
    /// The sites handed on (the others are skipped).
    sites: &'a [MatrixInput],
    sink: F,
    /// The heads' `z` of the current layer, filled head by head.
    z: Vec<f32>,
}

impl<F> Collector<'_, '_, F> {
    /// The site of a hook point and, for a normalised point, its norm's weight and bias ids; `None` for
    /// points that feed no matrix in this model.
    fn site(&self, p: HookPoint) -> Option<(MatrixInput, Option<[TensorKind; 2]>)> {
        let cfg = self.model.config();
        let no_norm = !cfg.normalization.is_some();
        let last = p.layer + 1 == cfg.n_layers;
        Some(match p.kind {
            HookKind::ResidPre if no_norm => (MatrixInput::Attn(p.layer), None),
            HookKind::ResidMid if no_norm => (MatrixInput::MlpIn(p.layer), None),
            HookKind::ResidPost if no_norm && last => (MatrixInput::Unembed, None),
            HookKind::Ln1Normalized => (
                MatrixInput::Attn(p.layer),
                Some([TensorKind::Ln1W, TensorKind::Ln1B]),
            ),
            HookKind::Ln2Normalized => (
                MatrixInput::MlpIn(p.layer),
                Some([TensorKind::Ln2W, TensorKind::Ln2B]),
            ),
            HookKind::LnFinalNormalized => (
                MatrixInput::Unembed,
                Some([TensorKind::LnFinalW, TensorKind::LnFinalB]),
            ),
            HookKind::MlpPost => (MatrixInput::MlpHidden(p.layer), None),
            HookKind::Z => (MatrixInput::Z(p.layer), None),
            _ => return None,
        })
    }
}

impl<F: FnMut(MatrixInput, &[f32])> Hooks for Collector<'_, '_, F> {
    fn wants(&self, kind: HookKind) -> bool {
        KINDS.contains(kind)
    }

    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        let Some((site, norm)) = self.site(p).filter(|(s, _)| self.sites.contains(s)) else {
            return;
        };
        let cfg = *self.model.config();
        let mut x = act.to_vec();
        if site == MatrixInput::Z(p.layer) {
            let d = cfg.d_head;
            self.z.resize(cfg.n_heads * d, 0.0);
            self.z[p.head * d..(p.head + 1) * d].copy_from_slice(act);
            if p.head + 1 < cfg.n_heads {
                return;
            }
            x = self.z.clone();
        }
        // RMSNorm's hook_normalized comes before its weight: apply it, as the matrix sees it.
        let rms = matches!(cfg.normalization, Normalization::RMS);
        if let (Some([w, b]), true) = (norm, rms) {
            let id = |kind| match kind {
                TensorKind::LnFinalW | TensorKind::LnFinalB => TensorId::global(kind),
                _ => TensorId::layer(kind, p.layer),
            };
            affine(self.model.vector(id(w)), self.model.vector(id(b)), &mut x);
        }
        if self.inputs == InputPrecision::Int8 {
            round_trip(&mut x, matches!(site, MatrixInput::MlpHidden(_)));
        }
        (self.sink)(site, &x);
    }
}

/// The matrix inputs of one sequence, in forward order.
type Inputs = Vec<(MatrixInput, Vec<f32>)>;

/// Runs `seqs` through `model` (each from position 0) and hands every matrix input of `sites` (taken
/// as `inputs`) to `sink`, in forward order, with a progress bar on a terminal.
fn collect(
    model: &Model<'_>,
    seqs: &[Vec<u32>],
    inputs: InputPrecision,
    sites: &[MatrixInput],
    sink: impl FnMut(MatrixInput, &[f32]),
) -> Result<()> {
    ensure!(!seqs.is_empty(), "calibration needs at least one sequence");
    let host = microlens::host::HostWeights::new(model);
    let model = &model.with_host(&host);
    let bar = ProgressBar::new(seqs.len() as u64);
    bar.set_style(ProgressStyle::with_template(
        "calibrating {bar:30} {pos}/{len} sequences [{elapsed_precise}]",
    )?);
    // Sequences in parallel (the host's blocked weights, the same bits), each recording its inputs;
    // then handed to `sink` in sequence order, as one sequence after the other would.
    let mut sink = sink;
    for (n, chunk) in seqs.chunks(64).enumerate() {
        let runs: Vec<Result<Inputs>> = chunk
            .par_iter()
            .enumerate()
            .map(|(i, tokens)| {
                let mut events = Vec::new();
                let mut collector = Collector {
                    model,
                    inputs,
                    sites,
                    sink: |s: MatrixInput, x: &[f32]| events.push((s, x.to_vec())),
                    z: Vec::new(),
                };
                crate::eval::run::run_with_hooks(model, tokens, &mut collector)
                    .with_context(|| format!("calibration sequence {}", 64 * n + i + 1))?;
                drop(collector);
                Ok(events)
            })
            .collect();
        for run in runs {
            for (s, x) in run? {
                sink(s, &x);
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// Every input of `sites` over `seqs`, per site row after row (`[tokens][width]`) in token order.
pub fn record(
    model: &Model<'_>,
    seqs: &[Vec<u32>],
    inputs: InputPrecision,
    sites: &[MatrixInput],
) -> Result<BTreeMap<MatrixInput, Vec<f32>>> {
    let mut rows: BTreeMap<MatrixInput, Vec<f32>> = BTreeMap::new();
    collect(model, seqs, inputs, sites, |s, x| {
        rows.entry(s).or_default().extend_from_slice(x);
    })?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::convert_state_dict;
    use crate::convert::fold::ProcessingOptions;
    use crate::import::random_model::{config, state_dict};
    use crate::quantize::encode::F32Encoder;
    use microlens::Positional;

    /// `sum (y - b)(y - b)ᵀ` of every `V` (all heads) and logits vector of a run: the outputs of `W_V`
    /// and `W_U` without their biases.
    #[derive(Default)]
    struct Outputs {
        v: Vec<f32>,
        sums: BTreeMap<MatrixInput, Vec<f64>>,
        b_v: Vec<f32>,
        b_u: Vec<f32>,
        n_heads: usize,
    }

    impl Outputs {
        fn add(&mut self, site: MatrixInput, y: &[f32], b: &[f32]) {
            let m = self
                .sums
                .entry(site)
                .or_insert(vec![0.0; y.len() * y.len()]);
            let y: Vec<f64> = y.iter().zip(b).map(|(y, b)| (y - b) as f64).collect();
            for (i, yi) in y.iter().enumerate() {
                for (j, yj) in y.iter().enumerate() {
                    m[i * y.len() + j] += yi * yj;
                }
            }
        }
    }

    impl Hooks for Outputs {
        fn wants(&self, kind: HookKind) -> bool {
            matches!(kind, HookKind::V | HookKind::Logits)
        }
        fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
            if p.kind == HookKind::Logits {
                let b = self.b_u.clone();
                return self.add(MatrixInput::Unembed, act, &b);
            }
            if p.layer == 0 {
                self.v.extend_from_slice(act);
                if p.head + 1 == self.n_heads {
                    let (v, b) = (std::mem::take(&mut self.v), self.b_v.clone());
                    self.add(MatrixInput::Attn(0), &v, &b);
                }
            }
        }
    }

    /// `E[x xᵀ]` of the rows of `x` (`[count][n]`), row-major.
    fn second_moment(x: &[f32], n: usize) -> Vec<f64> {
        let rows = x.len() / n;
        let m = nalgebra::DMatrix::from_row_iterator(rows, n, x.iter().map(|&v| v as f64));
        (m.transpose() * &m / rows as f64).as_slice().to_vec()
    }

    /// `W M Wᵀ` for `W` `[rows, n]` and `M` `[n, n]`.
    fn sandwich(w: &[f32], m: &[f64], n: usize) -> Vec<f64> {
        let rows = w.len() / n;
        let w = nalgebra::DMatrix::from_row_slice(
            rows,
            n,
            &w.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        );
        let m = nalgebra::DMatrix::from_row_slice(n, n, m);
        let p = &w * m * w.transpose();
        (0..rows)
            .flat_map(|i| (0..rows).map(move |j| (i, j)))
            .map(|(i, j)| p[(i, j)])
            .collect()
    }

    #[test]
    fn moments_are_those_of_what_the_matrices_multiply() {
        for norm in Normalization::ALL {
            for mlp in [false, true] {
                let cfg = config(norm, Positional::Standard, mlp);
                let sd = state_dict(&cfg, 5);
                let blob = convert_state_dict(sd, &cfg, &ProcessingOptions::none(), &F32Encoder)
                    .unwrap()
                    .blob;
                let model = Model::from_bytes(&blob).unwrap();
                let cfg = *model.config();
                let seqs = Source::default().sequences(&model).unwrap();
                let seqs = &seqs[..8];
                let ids: Vec<_> = microlens::tensors::Catalogue::new(&cfg).ids().collect();
                let sites: Vec<MatrixInput> =
                    ids.iter().filter_map(|&id| MatrixInput::of(id)).collect();
                let rec = record(&model, seqs, InputPrecision::Float, &sites).unwrap();
                let tokens: usize = seqs.iter().map(Vec::len).sum();
                for &id in &ids {
                    if let Some(site) = MatrixInput::of(id) {
                        let n = id.shape(&cfg)[1];
                        assert_eq!(rec[&site].len(), tokens * n, "{id}");
                    }
                }
                let vector = |id| model.vector(id).unwrap().iter().collect::<Vec<f32>>();
                let mut out = Outputs {
                    b_v: vector(TensorId::layer(TensorKind::BV, 0)),
                    b_u: vector(TensorId::global(TensorKind::BU)),
                    n_heads: cfg.n_heads,
                    ..Outputs::default()
                };
                for s in seqs {
                    crate::eval::run::run_with_hooks(&model, s, &mut out).unwrap();
                }
                for (site, id) in [
                    (MatrixInput::Attn(0), TensorId::layer(TensorKind::WV, 0)),
                    (MatrixInput::Unembed, TensorId::global(TensorKind::WU)),
                ] {
                    let w = crate::quantize::matrix_values(&model.matrix(id).unwrap());
                    let n = id.shape(&cfg)[1];
                    let want = sandwich(&w, &second_moment(&rec[&site], n), n);
                    for (a, b) in out.sums[&site].iter().zip(&want) {
                        let got = a / tokens as f64;
                        assert!(
                            (got - b).abs() <= 1e-4 * (1.0 + b.abs()),
                            "{norm:?} {id}: {got} vs {b}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bad_calibration_tokens_are_refused() {
        let cfg = config(Normalization::LN, Positional::Standard, false);
        let blob = convert_state_dict(
            state_dict(&cfg, 1),
            &cfg,
            &ProcessingOptions::default(),
            &F32Encoder,
        )
        .unwrap()
        .blob;
        let model = Model::from_bytes(&blob).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let err = |text: &str| {
            let path = dir.path().join("tokens.txt");
            std::fs::write(&path, text).unwrap();
            format!("{:#}", Source::File(path).sequences(&model).unwrap_err())
        };
        assert!(
            err("1,2,99\n").contains("out of range"),
            "{}",
            err("1,2,99\n")
        );
        assert!(
            err("1,2,x\n").contains("tokens.txt:1"),
            "{}",
            err("1,2,x\n")
        );
        assert!(err("\n\n").contains("no token sequence"), "{}", err("\n"));
        assert!(err(&format!("{}1", "1,".repeat(19))).contains("n_ctx"));
        let none = Source::Random {
            sequences: 0,
            seed: 1,
        };
        assert!(none.sequences(&model).is_err());
        assert!(record(&model, &[], InputPrecision::Float, &[MatrixInput::Unembed]).is_err());
    }
}
