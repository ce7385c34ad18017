//! Parameter initialisation for the trainer: seeded normal draws and constants, as candle `Var`s.

use anyhow::Result;
use candle_core::{Device, Tensor, Var};
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

/// A `Var` of `shape` drawn from `N(0, std^2)` with `rng`.
pub(crate) fn normal(rng: &mut impl Rng, shape: &[usize], std: f64) -> Result<Var> {
    let n = shape.iter().product();
    let data: Vec<f32> = (0..n)
        .map(|_| {
            let z: f64 = StandardNormal.sample(rng);
            (std * z) as f32
        })
        .collect();
    Ok(Var::from_tensor(&Tensor::from_vec(
        data,
        shape,
        &Device::Cpu,
    )?)?)
}

/// A `Var` of `shape` filled with `value`.
pub(crate) fn constant(shape: &[usize], value: f32) -> Result<Var> {
    Ok(Var::from_tensor(&Tensor::full(
        value,
        shape,
        &Device::Cpu,
    )?)?)
}
