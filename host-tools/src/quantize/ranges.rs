//! Activation ranges for the integer-only arithmetic: the largest magnitude of every hook point
//! (per TransformerLens name, that is per kind and layer, over heads and positions) in the float
//! forward over calibration sequences, and the fixed scales and multipliers they imply.

use std::collections::BTreeMap;

use anyhow::{ensure, Context, Result};
use microlens::integer::requantize::Multiplier;
use microlens::{HookKind, HookPoint, Hooks, Model};
use rayon::prelude::*;

/// The largest `|x|` of every hook point seen, keyed by kind and layer (0 outside the blocks).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ranges(BTreeMap<(HookKind, usize), f32>);

impl Hooks for Ranges {
    fn wants(&self, kind: HookKind) -> bool {
        // Per-head results switch the output projection to per head: the same values, summed later.
        kind != HookKind::Result
    }

    fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
        let m = act
            .iter()
            .filter(|v| v.is_finite())
            .fold(0f32, |m, v| m.max(v.abs()));
        let e = self.0.entry((p.kind, p.layer)).or_insert(0.0);
        *e = e.max(m);
    }
}

impl Ranges {
    /// The ranges of `model`'s float forward over `seqs` (each from position 0), in parallel over
    /// sequences (maxima, so the same in any order).
    pub fn calibrate(model: &Model<'_>, seqs: &[Vec<u32>]) -> Result<Self> {
        ensure!(!seqs.is_empty(), "calibration needs at least one sequence");
        let host = microlens::host::HostWeights::new(model);
        let model = &model.with_host(&host);
        let runs: Vec<Result<Ranges>> = seqs
            .par_iter()
            .enumerate()
            .map(|(i, tokens)| {
                let mut r = Ranges::default();
                crate::eval::run::run_with_hooks(model, tokens, &mut r)
                    .with_context(|| format!("calibration sequence {}", i + 1))?;
                Ok(r)
            })
            .collect();
        let mut all = Ranges::default();
        for r in runs {
            for (k, m) in r?.0 {
                let e = all.0.entry(k).or_insert(0.0);
                *e = e.max(m);
            }
        }
        Ok(all)
    }

    /// The largest `|x|` seen at `kind` in `layer`, `None` if the point was never reached.
    pub fn max_abs(&self, kind: HookKind, layer: usize) -> Option<f32> {
        self.0.get(&(kind, layer)).copied()
    }

    /// The symmetric scale mapping that range onto `-q_max..=q_max` (`max / q_max`), `None` if the
    /// point was never reached or was always 0.
    pub fn scale(&self, kind: HookKind, layer: usize, q_max: u16) -> Option<f32> {
        let m = self.max_abs(kind, layer)?;
        (m > 0.0 && q_max > 0).then(|| m / f32::from(q_max))
    }

    /// Every range by its TransformerLens hook name (`blocks.0.hook_resid_pre`), in forward order.
    pub fn by_name(&self) -> impl Iterator<Item = (String, f32)> + '_ {
        self.0.iter().map(|(&(kind, layer), &m)| {
            let p = HookPoint {
                kind,
                layer,
                head: 0,
                pos: 0,
            };
            (p.to_string(), m)
        })
    }
}

/// The fixed-point multiplier of `from / to` (the rescaling from one quantised tensor's scale to
/// another's), with a clear error for a ratio that cannot be one.
pub fn rescale(from: f64, to: f64) -> Result<Multiplier> {
    Multiplier::from_real(from / to)
        .with_context(|| format!("scale ratio {from:e} / {to:e} is not a fixed-point multiplier"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::random_model::{config, f32_blob};
    use crate::quantize::calibration::Source;
    use microlens::{Normalization, Positional};

    /// The largest `|x|` of one kind over one sequence, through a hook of its own.
    struct One(HookKind, usize, f32);
    impl Hooks for One {
        fn wants(&self, kind: HookKind) -> bool {
            kind == self.0
        }
        fn hook(&mut self, p: HookPoint, act: &mut [f32]) {
            if p.layer == self.1 {
                self.2 = act.iter().fold(self.2, |m, v| m.max(v.abs()));
            }
        }
    }

    #[test]
    fn ranges_are_the_forward_maxima() {
        let cfg = config(Normalization::LN, Positional::Standard, true);
        let blob = f32_blob(&cfg, 7);
        let model = Model::from_bytes(&blob).unwrap();
        let seqs = Source::default().sequences(&model).unwrap();
        let seqs = &seqs[..6];
        let ranges = Ranges::calibrate(&model, seqs).unwrap();
        assert_eq!(ranges, Ranges::calibrate(&model, seqs).unwrap());
        let n_layers = model.config().n_layers;
        for (kind, layer) in [
            (HookKind::ResidPost, n_layers - 1),
            (HookKind::Pattern, 0),
            (HookKind::MlpPost, 0),
        ] {
            let mut one = One(kind, layer, 0.0);
            for s in seqs {
                crate::eval::run::run_with_hooks(&model, s, &mut one).unwrap();
            }
            assert_eq!(ranges.max_abs(kind, layer), Some(one.2), "{kind:?}");
            let s = ranges.scale(kind, layer, 127).unwrap();
            assert!((s * 127.0 - one.2).abs() <= one.2 * 1e-6);
        }
        // Attention patterns are probabilities, and every point a forward reaches has a name.
        assert!(ranges.max_abs(HookKind::Pattern, 0).unwrap() <= 1.0);
        let names: Vec<String> = ranges.by_name().map(|(n, _)| n).collect();
        assert!(
            names.contains(&"blocks.0.hook_resid_pre".to_string()),
            "{names:?}"
        );
        assert!(names.contains(&"blocks.0.attn.hook_pattern".to_string()));
        assert_eq!(ranges.max_abs(HookKind::Result, 0), None);
        // A rescaling between two of them, within 2^-31.
        let (a, b) = (
            f64::from(ranges.scale(HookKind::ResidPre, 0, 127).unwrap()),
            f64::from(ranges.scale(HookKind::Ln1Normalized, 0, 127).unwrap()),
        );
        let m = rescale(a, b).unwrap();
        assert!((m.real() - a / b).abs() <= a / b * 2f64.powi(-31));
        assert!(rescale(1.0, 0.0).is_err());
    }
}
