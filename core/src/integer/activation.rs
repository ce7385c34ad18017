//! An MLP activation as an int8 -> int8 table: `out = clamp(round(f(s_in (q - z_in)) / s_out) + z_out)`
//! for each of the 256 inputs, computed on the host at conversion with the float forward's own `f`
//! (`math::activation`), then one lookup per value on the device. Worst error: half an output step
//! (`s_out / 2`, exactly the rounding) where the output does not clamp, plus `f32`'s own error in `f`
//! (below `1e-6` relative), measured by the tests against `f64` definitions.

use crate::config::ActFn;
use crate::math::activation;

/// An affine int8 quantisation: `real = scale (q - zero)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Affine {
    /// The real step between two integers.
    pub scale: f32,
    /// The integer standing for 0.
    pub zero: i32,
}

/// The 256 outputs of an activation, indexed by the input's bits (`q as u8`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table(pub [i8; 256]);

impl Table {
    /// The table of `act` between the two quantisations; `None` for SoLU (not elementwise) or a scale
    /// that is not finite and positive.
    pub fn build(act: ActFn, input: Affine, output: Affine) -> Option<Self> {
        let valid = |a: Affine| a.scale.is_finite() && a.scale > 0.0;
        if act == ActFn::Solu || !valid(input) || !valid(output) {
            return None;
        }
        let x = image(act, input);
        let mut table = [0i8; 256];
        for (t, y) in table.iter_mut().zip(x) {
            let q = libm::roundf(y / output.scale) as i64 + i64::from(output.zero);
            *t = q.clamp(i8::MIN.into(), i8::MAX.into()) as i8;
        }
        Some(Self(table))
    }

    /// The table of `act` with the output quantisation spanning its image of the 256 inputs (and 0):
    /// `scale = (max - min) / 255`, so no output clamps. `None` as for [`Table::build`].
    pub fn build_spanning(act: ActFn, input: Affine) -> Option<(Self, Affine)> {
        if act == ActFn::Solu || !(input.scale.is_finite() && input.scale > 0.0) {
            return None;
        }
        let (lo, hi) = image(act, input)
            .iter()
            .fold((0f32, 0f32), |(lo, hi), &y| (lo.min(y), hi.max(y)));
        let scale = (hi - lo) / 255.0;
        let scale = if scale > 0.0 { scale } else { 1.0 };
        let output = Affine {
            scale,
            zero: -128 - libm::roundf(lo / scale) as i32,
        };
        Some((Self::build(act, input, output)?, output))
    }

    /// `f(q)`, quantised.
    #[inline]
    pub fn apply(&self, q: i8) -> i8 {
        self.0[usize::from(q as u8)]
    }

    /// [`Table::apply`] in place over `x`.
    pub fn apply_all(&self, x: &mut [i8]) {
        x.iter_mut().for_each(|q| *q = self.apply(*q));
    }
}

/// `f` of the 256 inputs, indexed by their bits.
fn image(act: ActFn, input: Affine) -> [f32; 256] {
    let mut x = [0f32; 256];
    for (i, v) in x.iter_mut().enumerate() {
        *v = input.scale * (i32::from(i as u8 as i8) - input.zero) as f32;
    }
    activation::apply(act, &mut x);
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::activation_f64 as definition;

    /// Every one of the 256 inputs of every elementwise activation, over input ranges from +-1 to
    /// +-16 and asymmetric zero points: within half an output step plus `1e-6` relative.
    #[test]
    fn every_input_within_half_an_output_step() {
        let mut worst_steps = 0f64;
        for act in ActFn::ALL.into_iter().filter(|&a| a != ActFn::Solu) {
            for range in [1.0f32, 4.0, 8.0, 16.0] {
                for zero_in in [0, -20, 37] {
                    let input = Affine {
                        scale: range / 127.0,
                        zero: zero_in,
                    };
                    // The output range: the image of the input range (GELU and SiLU dip to about -0.28).
                    let lo = -0.3f32;
                    let hi = range * 1.2;
                    let output = Affine {
                        scale: (hi - lo) / 255.0,
                        zero: -128 - libm::roundf(lo / ((hi - lo) / 255.0)) as i32,
                    };
                    let table = Table::build(act, input, output).unwrap();
                    for q in i8::MIN..=i8::MAX {
                        let x = f64::from(input.scale) * f64::from(i32::from(q) - zero_in);
                        let want = definition(act, x);
                        let got = f64::from(output.scale)
                            * f64::from(i32::from(table.apply(q)) - output.zero);
                        let bound = 0.5 * f64::from(output.scale) + 1e-6 * want.abs().max(1.0);
                        let clamped = table.apply(q) == i8::MIN || table.apply(q) == i8::MAX;
                        if clamped && (got - want).abs() > bound {
                            continue;
                        }
                        assert!((got - want).abs() <= bound, "{act:?} {q}: {got} vs {want}");
                        worst_steps = worst_steps.max((got - want).abs() / f64::from(output.scale));
                    }
                }
            }
        }
        assert!(
            worst_steps > 0.45 && worst_steps <= 0.5 + 1e-3,
            "{worst_steps}"
        );
    }

    #[test]
    fn spanning_never_clamps() {
        for act in [ActFn::Gelu, ActFn::Silu, ActFn::Relu] {
            let input = Affine {
                scale: 0.05,
                zero: 0,
            };
            let (t, out) = Table::build_spanning(act, input).unwrap();
            for q in i8::MIN..=i8::MAX {
                let x = f64::from(input.scale) * f64::from(q);
                let got = f64::from(out.scale) * f64::from(i32::from(t.apply(q)) - out.zero);
                assert!((got - definition(act, x)).abs() <= 0.5 * f64::from(out.scale) + 1e-6);
            }
        }
        assert_eq!(
            Table::build_spanning(
                ActFn::Solu,
                Affine {
                    scale: 1.0,
                    zero: 0
                }
            ),
            None
        );
    }

    #[test]
    fn rejects() {
        let a = Affine {
            scale: 0.1,
            zero: 0,
        };
        assert_eq!(Table::build(ActFn::Solu, a, a), None);
        assert_eq!(
            Table::build(
                ActFn::Gelu,
                Affine {
                    scale: 0.0,
                    zero: 0
                },
                a
            ),
            None
        );
        assert_eq!(
            Table::build(
                ActFn::Gelu,
                a,
                Affine {
                    scale: f32::NAN,
                    zero: 0
                }
            ),
            None
        );
        let mut x = [-128i8, 0, 127];
        Table::build(ActFn::Relu, a, a).unwrap().apply_all(&mut x);
        assert_eq!(x, [0, 0, 127]);
    }
}
