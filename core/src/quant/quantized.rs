//! What a quantised activation vector is: its int8 or int16 values with one scale ([`Quantized`]),
//! the int16 values' lane order ([`Wide`]) and the integer ranges. The quantisers (`activations`,
//! and the assembly's `arch/armv7em/quantize.rs`) make them; the kernels read them.

/// Largest magnitude of a quantised value: the range is symmetric, `-127..=127`.
pub const Q_MAX: f32 = 127.0;

/// Largest magnitude of an int16 activation: `-32767..=32767`.
pub const Q16_MAX: f32 = 32767.0;

/// A vector quantised to int8 or int16 with one scale: `x[i] ~ q[i] * scale`.
#[derive(Clone, Copy, Debug)]
pub struct Quantized<'q> {
    /// The int8 values (empty for int16).
    pub q: &'q [i8],
    /// The int16 values (empty for int8).
    pub wide: Wide<'q>,
    /// Their common scale.
    pub scale: f32,
    /// `q` as the 16-bit lanes of the four-row kernel (`dot4::dot4_strided`): per group of four
    /// values `[q0, q2]` and `[q1, q3]`, two words; empty unless `q` is whole groups and the scratch
    /// had room for them.
    pub lanes: &'q [u32],
}

/// int16 values stored in the order of the kernels' 16-bit lanes: per whole group of four values
/// `[x0, x2, x1, x3]` (the words `[x0, x2]` and `[x1, x3]`, as [`Quantized::lanes`] pairs int8
/// values), the last `len % 4` values in order after them.
#[derive(Clone, Copy, Debug)]
pub struct Wide<'q>(pub &'q [i16]);

impl Wide<'_> {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Value `c` (0 beyond the end).
    #[inline(always)]
    pub fn get(&self, c: usize) -> i32 {
        let at = match (c | 3) < self.0.len() {
            // Within a whole group: slots 1 and 2 swapped.
            true => c ^ (((c ^ (c >> 1)) & 1) * 3),
            false => c,
        };
        self.0.get(at).map_or(0, |&v| v as i32)
    }
}

/// Puts the int16 values of whole groups of four from the lane order of [`Wide`] (`[x0, x2]`,
/// `[x1, x3]`) back in order (`[x0, x1]`, `[x2, x3]`), in place: the values then lie as an int16
/// cache's do, and two of them in a word meet two of the cache's in one `SMLALD`.
pub(crate) fn lanes_in_order(words: &mut [u32]) {
    for pair in words.chunks_exact_mut(2) {
        let (a, b) = (pair[0], pair[1]);
        pair[0] = (a & 0xffff) | (b << 16);
        pair[1] = (a >> 16) | (b & 0xffff_0000);
    }
}
