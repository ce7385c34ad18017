//! An MLP activation over int16 inputs as a piecewise-linear table: 257 knots `y_k = f(s_in (256 k -
//! 32768))` quantised to int16 on the host at conversion, then per value one segment lookup and one
//! rounded interpolation (`y_i + ((y_{i+1} - y_i) t + 128) >> 8`, `t` the input's low byte). The
//! finer grid for models whose int8 table ([`super::activation`]) costs too much: its error is the
//! chord's (`h^2 / 8 max|f''|` for the knot spacing `h = 256 s_in`) plus one output step, where the
//! int8 table's is half its input step times `|f'|`. Worst error, measured by the tests against `f64`
//! definitions over every `i16` input: 1.0 output step plus `0.1 h^2` (GELU, SiLU; exact for ReLU).

use super::activation::Affine;
use crate::config::ActFn;
use crate::math::activation;

/// Knots of the table: 256 segments of 256 inputs each.
pub const KNOTS: usize = 257;

/// The int16 knots of an activation, and its output quantisation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interpolated {
    /// `y_k`, the quantised outputs at the knots.
    pub knots: [i16; KNOTS],
    /// The output's quantisation: `f(x) ~ scale (y - zero)`.
    pub output: Affine,
}

impl Interpolated {
    /// The table of `act` on inputs `x = s_in q` (symmetric int16 `q`), its output symmetric over the
    /// knots' image (`scale = max|y| / 32767`). `None` for SoLU (not elementwise) or a scale that is not
    /// finite and positive.
    pub fn build(act: ActFn, s_in: f32) -> Option<Self> {
        if act == ActFn::Solu || !(s_in.is_finite() && s_in > 0.0) {
            return None;
        }
        let mut x = [0f32; KNOTS];
        for (k, v) in x.iter_mut().enumerate() {
            *v = s_in * (256 * k as i32 - 32768) as f32;
        }
        activation::apply(act, &mut x);
        let max = x.iter().fold(0f32, |m, y| m.max(y.abs()));
        let scale = if max > 0.0 && max.is_finite() {
            max / 32767.0
        } else {
            1.0
        };
        let mut knots = [0i16; KNOTS];
        for (q, y) in knots.iter_mut().zip(x) {
            *q = libm::roundf(y / scale).clamp(-32767.0, 32767.0) as i16;
        }
        Some(Self {
            knots,
            output: Affine { scale, zero: 0 },
        })
    }

    /// `f(s_in q)`, quantised.
    #[inline]
    pub fn apply(&self, q: i16) -> i16 {
        lookup(q, |k| self.knots.get(k).copied().unwrap_or(0))
    }
}

/// The table with knots `knot(0..KNOTS)` at `q`: the segment `q`'s high byte picks, interpolated by
/// its low byte `t`, `y_i + ((y_{i+1} - y_i) t + 128) >> 8`.
#[inline(always)]
pub fn lookup(q: i16, knot: impl Fn(usize) -> i16) -> i16 {
    let u = (i32::from(q) + 32768) as usize;
    let (i, t) = (u >> 8, (u & 255) as i32);
    let (a, b) = (i32::from(knot(i)), i32::from(knot(i + 1)));
    // |b - a| <= 65534, times t <= 255: fits an i32; the result lies between a and b.
    (a + (((b - a) * t + 128) >> 8)) as i16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::activation_f64 as definition;

    /// Every `i16` input of GELU (both), SiLU and ReLU over input ranges +-2 to +-32: within one output
    /// step plus `0.1 h^2` (GELU's `max|f''|/8` is 0.05, SiLU's 0.031).
    #[test]
    fn every_i16_input_within_one_step_plus_the_chord() {
        for act in [ActFn::Gelu, ActFn::GeluNew, ActFn::Silu, ActFn::Relu] {
            for range in [2.0f32, 8.0, 32.0] {
                let s_in = range / 32767.0;
                let t = Interpolated::build(act, s_in).unwrap();
                let h = 256.0 * f64::from(s_in);
                let step = f64::from(t.output.scale);
                let chord = if act == ActFn::Relu { 0.0 } else { 0.1 * h * h };
                let mut worst = 0f64;
                for q in i16::MIN..=i16::MAX {
                    let want = definition(act, f64::from(s_in) * f64::from(q));
                    let got = step * f64::from(t.apply(q));
                    worst = worst.max((got - want).abs() - chord);
                }
                assert!(
                    worst <= step * (1.0 + 1e-3),
                    "{act:?} +-{range}: {worst:e} > {step:e}"
                );
            }
        }
        assert_eq!(Interpolated::build(ActFn::Solu, 1.0), None);
        assert_eq!(Interpolated::build(ActFn::Gelu, 0.0), None);
    }
}
