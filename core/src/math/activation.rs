//! MLP activation functions, as TransformerLens 2.x defines them.

use super::softmax::exp;
use crate::config::ActFn;

/// `sqrt(2 / pi)`, as `np.sqrt(2.0 / np.pi)` rounded to `f32`.
const SQRT_2_OVER_PI: f32 = 0.797_884_6;

/// Applies `act` in place to a whole MLP hidden vector (SoLU needs the whole vector).
pub fn apply(act: ActFn, x: &mut [f32]) {
    match act {
        ActFn::Relu => x.iter_mut().for_each(|v| *v = v.max(0.0)),
        ActFn::Gelu => x.iter_mut().for_each(|v| {
            *v = 0.5 * *v * (1.0 + libm::erff(*v * core::f32::consts::FRAC_1_SQRT_2))
        }),
        ActFn::GeluNew | ActFn::GeluPytorchTanh => x.iter_mut().for_each(|v| {
            let u = *v;
            *v = 0.5 * u * (1.0 + libm::tanhf(SQRT_2_OVER_PI * (u + 0.044715 * u * u * u)));
        }),
        ActFn::GeluFast => x.iter_mut().for_each(|v| {
            let u = *v;
            *v = 0.5 * u * (1.0 + libm::tanhf(u * 0.797_884_6 * (1.0 + 0.044715 * u * u)));
        }),
        ActFn::Silu => x.iter_mut().for_each(|v| *v /= 1.0 + exp(-*v)),
        ActFn::Solu => solu(x),
    }
}

/// A gated MLP's hidden vector: `x[i] = act(x[i]) * linear[i]` (as far as both go), the product of
/// [`apply`]'s value in one pass with it for the elementwise functions (the same bits as the two
/// passes).
pub fn apply_gated(act: ActFn, x: &mut [f32], linear: &[f32]) {
    match act {
        ActFn::Silu => x
            .iter_mut()
            .zip(linear)
            .for_each(|(v, l)| *v = *v / (1.0 + exp(-*v)) * l),
        _ => {
            apply(act, x);
            x.iter_mut().zip(linear).for_each(|(v, l)| *v *= l);
        }
    }
}

/// `x * softmax(x)` without scratch memory: the softmax is recomputed from the max and the sum.
fn solu(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = x.iter().map(|&v| exp(v - max)).sum();
    x.iter_mut().for_each(|v| *v *= exp(*v - max) / sum);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gated_pass_gives_the_bits_of_the_activation_then_the_product() {
        let x: std::vec::Vec<f32> = (0..200).map(|i| (i as f32 - 100.0) * 0.173).collect();
        let linear: std::vec::Vec<f32> = (0..200)
            .map(|i| ((i * 37) % 29) as f32 * 0.31 - 4.0)
            .collect();
        let acts = [
            ActFn::Relu,
            ActFn::Gelu,
            ActFn::GeluNew,
            ActFn::GeluPytorchTanh,
            ActFn::GeluFast,
            ActFn::Silu,
            ActFn::Solu,
        ];
        for act in acts {
            let mut two = x.clone();
            apply(act, &mut two);
            two.iter_mut().zip(&linear).for_each(|(v, l)| *v *= l);
            let mut one = x.clone();
            apply_gated(act, &mut one, &linear);
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<std::vec::Vec<_>>();
            assert_eq!(bits(&one), bits(&two), "{act:?}");
        }
    }
}
