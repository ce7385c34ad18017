//! Sinusoidal positional encoding (Vaswani et al. 2017), computed on the fly: no table in flash.

/// Base of the wavelengths: `PE(pos, 2i) = sin(pos / BASE^(2i / d_model))`.
pub const BASE: f64 = 10000.0;

/// The encoding of position `pos` for a residual stream of `out.len()` dimensions, written into `out`:
/// `out[2i] = sin(pos / 10000^(2i / d_model))`, `out[2i + 1] = cos(pos / 10000^(2i / d_model))`.
///
/// Computed in `f64` with `libm` (`pow`, `sincos`) and rounded once to `f32`: within half an `f32` ulp
/// (plus `libm`'s sub-ulp `f64` error) of the exact value at every position, and the same bits on every
/// target (software `f64` on cores without a double-precision FPU). The trainer builds its table from
/// this function, so a trained model sees exactly what the core adds.
pub fn sinusoidal(pos: usize, out: &mut [f32]) {
    let d_model = out.len() as f64;
    for (i, pair) in out.chunks_mut(2).enumerate() {
        let wavelength = libm::pow(BASE, (2 * i) as f64 / d_model);
        let (sin, cos) = libm::sincos(pos as f64 / wavelength);
        pair[0] = sin as f32;
        if let Some(c) = pair.get_mut(1) {
            *c = cos as f32;
        }
    }
}
