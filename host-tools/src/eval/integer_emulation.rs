//! The integer-only arithmetic's steps emulated inside a model's own forward pass, to measure what
//! each costs with exact weights (`microlens fidelity --emulate-integer`): the attention softmax, the
//! norms and the MLP activation replaced by the core's integer versions ([`microlens::integer`]) on
//! their inputs quantised with ranges calibrated on the float forward ([`Ranges`]).

use std::collections::HashMap;

use anyhow::{ensure, Context, Result};
use microlens::integer::activation::{Affine, Table};
use microlens::integer::interpolated::Interpolated;
use microlens::integer::norm::normalize;
use microlens::integer::softmax::softmax;
use microlens::weights::affine;
use microlens::{ActFn, HookKind, HookPoint, Hooks, Model, Normalization, TensorId, TensorKind};

use crate::quantize::ranges::Ranges;

/// One integer step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IntegerStep {
    /// The attention softmax on scores in Q11, probabilities in Q15.
    Softmax,
    /// LayerNorm/RMSNorm of the residual stream quantised to int16 (calibrated scale), output in Q11.
    Norm,
    /// The MLP activation as an int8 -> int8 table (calibrated input scale).
    Activation,
    /// The MLP activation over int16 inputs (calibrated scale) as a 257-knot piecewise-linear table.
    Activation16,
}

impl IntegerStep {
    /// The CLI's name.
    pub fn name(self) -> &'static str {
        match self {
            IntegerStep::Softmax => "softmax",
            IntegerStep::Norm => "norm",
            IntegerStep::Activation => "activation",
            IntegerStep::Activation16 => "activation16",
        }
    }
}

/// Hooks that replace the chosen [`IntegerStep`]s of a forward pass by their integer versions.
#[derive(Clone, Debug)]
pub struct IntegerEmulation<'m, 'b> {
    model: &'m Model<'b>,
    steps: Vec<IntegerStep>,
    ranges: Ranges,
    /// Per block, the activation's input quantisation, table and output quantisation.
    tables: Vec<(Affine, Table, Affine)>,
    /// Per block, the int16 activation's input scale and table.
    tables16: Vec<(f32, Interpolated)>,
    /// The MLP's pre-activation of each position.
    pre: HashMap<usize, Vec<f32>>,
    /// The norm's input of each position: the last residual stream seen.
    resid: HashMap<usize, Vec<f32>>,
    /// The last attention scores row.
    scores: Vec<f32>,
}

impl<'m, 'b> IntegerEmulation<'m, 'b> {
    /// Emulates `steps` on `model` with `ranges` (of its own float forward). An error for an activation
    /// step on a model whose MLP is gated or SoLU (not one table), or whose ranges miss a point.
    pub fn new(model: &'m Model<'b>, steps: &[IntegerStep], ranges: Ranges) -> Result<Self> {
        let cfg = model.config();
        let (mut tables, mut tables16) = (Vec::new(), Vec::new());
        let activation = [IntegerStep::Activation, IntegerStep::Activation16];
        if steps.iter().any(|s| activation.contains(s)) && cfg.d_mlp.is_some() {
            ensure!(
                !cfg.gated_mlp && cfg.act_fn != ActFn::Solu,
                "--emulate-integer activation needs an ungated, elementwise MLP activation"
            );
            ensure!(
                !activation.iter().all(|s| steps.contains(s)),
                "--emulate-integer takes one of activation and activation16"
            );
        }
        if steps.contains(&IntegerStep::Activation16) && cfg.d_mlp.is_some() {
            for l in 0..cfg.n_layers {
                let max = ranges.max_abs(HookKind::MlpPre, l).unwrap_or(0.0).max(1e-6);
                let s_in = max / 32767.0;
                let t = Interpolated::build(cfg.act_fn, s_in)
                    .with_context(|| format!("no int16 table at input scale {s_in}"))?;
                tables16.push((s_in, t));
            }
        }
        if steps.contains(&IntegerStep::Activation) && cfg.d_mlp.is_some() {
            for l in 0..cfg.n_layers {
                let max = ranges.max_abs(HookKind::MlpPre, l).unwrap_or(0.0).max(1e-6);
                let input = Affine {
                    scale: max / 127.0,
                    zero: 0,
                };
                let (t, output) = Table::build_spanning(cfg.act_fn, input).with_context(|| {
                    format!(
                        "no int8 table for {:?} at input scale {}",
                        cfg.act_fn, input.scale
                    )
                })?;
                tables.push((input, t, output));
            }
        }
        Ok(IntegerEmulation {
            model,
            steps: steps.to_vec(),
            ranges,
            tables,
            tables16,
            resid: HashMap::new(),
            pre: HashMap::new(),
            scores: Vec::new(),
        })
    }

    fn on(&self, s: IntegerStep) -> bool {
        self.steps.contains(&s)
    }

    /// The integer norm of the stored residual of `p.pos`, then the norm's weight and bias for LN.
    fn norm(&self, p: HookPoint, act: &mut [f32]) {
        let cfg = self.model.config();
        let (resid_kind, w, b) = match p.kind {
            HookKind::Ln1Normalized => (HookKind::ResidPre, TensorKind::Ln1W, TensorKind::Ln1B),
            HookKind::Ln2Normalized => (HookKind::ResidMid, TensorKind::Ln2W, TensorKind::Ln2B),
            _ => (
                HookKind::ResidPost,
                TensorKind::LnFinalW,
                TensorKind::LnFinalB,
            ),
        };
        let layer = match p.kind {
            HookKind::LnFinalNormalized => cfg.n_layers - 1,
            _ => p.layer,
        };
        let (Some(x), Some(s)) = (
            self.resid.get(&p.pos),
            self.ranges.scale(resid_kind, layer, i16::MAX as u16),
        ) else {
            return;
        };
        let q: Vec<i16> = x
            .iter()
            .map(|&v| quantize(v / s, i16::MAX.into()) as i16)
            .collect();
        let n = q.len() as f64;
        let eps_n2 = (n * n * f64::from(cfg.eps) / (f64::from(s) * f64::from(s))).round() as u64;
        let centre = matches!(cfg.normalization, Normalization::LN | Normalization::LNPre);
        let mut y = vec![0i16; q.len()];
        if normalize(&q, centre, eps_n2, &mut y).is_none() {
            return;
        }
        act.iter_mut()
            .zip(&y)
            .for_each(|(a, &y)| *a = f32::from(y) / 2048.0);
        let id = |kind| match p.kind {
            HookKind::LnFinalNormalized => TensorId::global(kind),
            _ => TensorId::layer(kind, p.layer),
        };
        let rms = matches!(
            cfg.normalization,
            Normalization::RMS | Normalization::RMSPre
        );
        if !rms {
            affine(self.model.vector(id(w)), self.model.vector(id(b)), act);
        }
    }
}

/// `round(x)` saturated to `-max..=max`.
fn quantize(x: f32, max: i32) -> i32 {
    (x.round() as i32).clamp(-max, max)
}

impl Hooks for IntegerEmulation<'_, '_> {
    fn wants(&self, kind: HookKind) -> bool {
        !self.steps.is_empty() && kind != HookKind::Result
    }

    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        match p.kind {
            HookKind::ResidPre | HookKind::ResidMid | HookKind::ResidPost => {
                self.resid.insert(p.pos, act.to_vec());
            }
            HookKind::AttnScores => self.scores = act.to_vec(),
            HookKind::Pattern if self.on(IntegerStep::Softmax) => {
                let x: Vec<i32> = self
                    .scores
                    .iter()
                    .map(|&v| quantize(v * 2048.0, i32::MAX))
                    .collect();
                let mut p = vec![0u16; x.len()];
                softmax(&x, &mut p);
                act.iter_mut()
                    .zip(&p)
                    .for_each(|(a, &p)| *a = f32::from(p) / 32768.0);
            }
            HookKind::Ln1Normalized | HookKind::Ln2Normalized | HookKind::LnFinalNormalized
                if self.on(IntegerStep::Norm) =>
            {
                self.norm(p, act)
            }
            HookKind::MlpPre => {
                self.pre.insert(p.pos, act.to_vec());
            }
            HookKind::MlpPost if !self.tables16.is_empty() => {
                let (Some((s_in, t)), Some(x)) = (self.tables16.get(p.layer), self.pre.get(&p.pos))
                else {
                    return;
                };
                for (a, &x) in act.iter_mut().zip(x) {
                    let q = t.apply(quantize(x / s_in, i16::MAX.into()) as i16);
                    *a = t.output.scale * f32::from(q);
                }
            }
            HookKind::MlpPost => {
                let (Some((input, t, output)), Some(x)) =
                    (self.tables.get(p.layer), self.pre.get(&p.pos))
                else {
                    return;
                };
                for (a, &x) in act.iter_mut().zip(x) {
                    let q = t.apply(quantize(x / input.scale, 127) as i8);
                    *a = output.scale * (i32::from(q) - output.zero) as f32;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::metrics::{kl, log_softmax};
    use crate::eval::run::{run_model, run_with_hooks};
    use crate::import::random_model::{config, f32_blob};
    use crate::quantize::calibration::Source;
    use microlens::Positional;

    /// Each step, alone and together, on LN and RMS models with a GELU MLP: the logits move (the
    /// steps are applied) but stay within a mean KL of 1e-4 of the float forward's.
    #[test]
    fn every_step_applies_and_stays_close() {
        for norm in [Normalization::LN, Normalization::RMS] {
            let mut cfg = config(norm, Positional::Standard, true);
            cfg.act_fn = ActFn::Gelu;
            let blob = f32_blob(&cfg, 3);
            let model = Model::from_bytes(&blob).unwrap();
            let seqs = Source::default().sequences(&model).unwrap();
            let ranges = Ranges::calibrate(&model, &seqs[..32]).unwrap();
            let all = [
                IntegerStep::Softmax,
                IntegerStep::Norm,
                IntegerStep::Activation,
            ];
            let sets: Vec<Vec<IntegerStep>> =
                all.iter().map(|&s| vec![s]).chain([all.to_vec()]).collect();
            for steps in sets {
                let mut em = IntegerEmulation::new(&model, &steps, ranges.clone()).unwrap();
                let (mut total, mut n, mut moved) = (0.0, 0usize, false);
                for tokens in &seqs[32..40] {
                    let float = run_model(&model, tokens).unwrap().logits;
                    let int = run_with_hooks(&model, tokens, &mut em.clone()).unwrap();
                    for (f, i) in float.iter().zip(&int) {
                        moved |= f != i;
                        total += kl(&log_softmax(f), &log_softmax(i));
                        n += 1;
                    }
                }
                let mean = total / n as f64;
                assert!(moved, "{norm:?} {steps:?} changed nothing");
                assert!(mean < 1e-4, "{norm:?} {steps:?}: mean KL {mean:e}");
                em.steps.clear();
                assert!(!em.wants(HookKind::Pattern));
            }
        }
    }

    #[test]
    fn gated_or_solu_activation_is_refused() {
        let mut cfg = config(Normalization::LN, Positional::Standard, true);
        cfg.act_fn = ActFn::Solu;
        let blob = f32_blob(&cfg, 3);
        let model = Model::from_bytes(&blob).unwrap();
        let err = IntegerEmulation::new(&model, &[IntegerStep::Activation], Ranges::default());
        assert!(err.is_err());
        assert!(IntegerEmulation::new(&model, &[IntegerStep::Norm], Ranges::default()).is_ok());
        cfg.act_fn = ActFn::Gelu;
        let blob = f32_blob(&cfg, 3);
        let model = Model::from_bytes(&blob).unwrap();
        let both = [IntegerStep::Activation, IntegerStep::Activation16];
        assert!(IntegerEmulation::new(&model, &both, Ranges::default()).is_err());
    }
}
