//! Storage types of tensors in a blob, and their byte sizes.

use serde::{Deserialize, Serialize};

/// Width of an `i4` quantisation group along a row (the input dimension).
pub const I4_GROUP: usize = 32;

/// Width of an `i8g` quantisation group along a row: one scale per 8 inputs (10 bits per weight).
pub const I8_GROUP: usize = 8;

/// Bytes of one quantisation scale: scales are IEEE-754 binary16, little-endian (as llama.cpp's
/// `q8_0` block scales), finite and positive, widened exactly to `f32` when used.
pub const SCALE_BYTES: usize = 2;

/// Bytes of one stored row sum: an `I8` matrix may keep its rows' exact sums `sum_c W[r][c]` after its
/// scales, one little-endian `i32` per row (what a centred input's correction adds back).
pub const ROW_SUM_BYTES: usize = 4;

/// The stored bytes of scale `s`, or `None` unless `s` is finite, positive and exactly an `f16` (see
/// [`scale_up`]).
#[cfg(any(feature = "std", feature = "encode", test))]
pub fn encode_scale(s: f32) -> Option<[u8; SCALE_BYTES]> {
    let h = half::f16::from_f32(s);
    (s.is_finite() && s > 0.0 && h.to_f32() == s).then(|| h.to_le_bytes())
}

/// The scale stored in `b` (0 if `b` is short): exact, `f16` widens to `f32` without rounding.
pub fn decode_scale(b: &[u8]) -> f32 {
    match b {
        [lo, hi, ..] => widen_f16(u16::from_le_bytes([*lo, *hi])),
        _ => 0.0,
    }
}

/// The IEEE binary16 with bits `h` as an `f32`: exact, and bit for bit what `half::f16::to_f32` gives
/// (NaNs keep their payload and become quiet), in a few integer instructions on cores without `F16C`.
#[inline]
pub fn widen_f16(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let magnitude = u32::from(h & 0x7fff);
    // Normal numbers (exponent 1..=30): rebias the exponent by 127 - 15 = 112, in one add.
    if magnitude.wrapping_sub(0x0400) < 0x7800 {
        return f32::from_bits(sign | ((magnitude << 13) + (112 << 23)));
    }
    let exp = u32::from(h >> 10) & 0x1f;
    let man = u32::from(h & 0x03ff);
    match exp {
        // Zero and subnormals: `man * 2^-24`, exact in `f32`.
        0 => {
            let m = man as f32 * (1.0 / 16_777_216.0);
            f32::from_bits(sign | m.to_bits())
        }
        0x1f if man == 0 => f32::from_bits(sign | 0x7f80_0000),
        0x1f => f32::from_bits(sign | 0x7fc0_0000 | man << 13),
        _ => f32::from_bits(sign | (exp + 112) << 23 | man << 13),
    }
}

/// Whether every stored scale in `scales` is finite and positive (all that a blob may hold, and all
/// the integer kernels meet).
pub fn scales_valid(scales: &[u8]) -> bool {
    scales.chunks_exact(SCALE_BYTES).all(|b| {
        let s = decode_scale(b);
        s.is_finite() && s > 0.0
    })
}

/// The stored scale in `b` for the integer kernels (0 if `b` is short): equal to [`decode_scale`] for
/// every non-negative finite `f16`, all that `Model::from_bytes` accepts (a negative one gives its
/// magnitude, a non-finite one a finite value): [`scale_bits`] times [`SCALE_UNIT`].
#[inline(always)]
pub fn decode_finite_scale(b: &[u8]) -> f32 {
    scale_bits(b) * SCALE_UNIT
}

/// `2^112`, the factor between an `f16`'s bits moved into an `f32` ([`scale_bits`]) and its value.
pub const SCALE_UNIT: f32 = f32::from_bits((127 + 112) << 23);

/// The magnitude of the stored scale in `b` divided by [`SCALE_UNIT`], exactly (0 if `b` is short): the
/// `f16`'s exponent and mantissa bits moved into an `f32`, whose exponent is then 112 too small (a
/// subnormal `f32` for a subnormal `f16`; IEEE 754 and Rust keep subnormals). For a finite `f16` and
/// any `s` with `s * 2^112` finite, `scale_bits(b) * (s * SCALE_UNIT)` is bit for bit
/// `decode_scale(b) * s`: both are the one rounding of the same exact product.
#[inline(always)]
pub fn scale_bits(b: &[u8]) -> f32 {
    match b {
        [lo, hi, ..] => magnitude_bits(u32::from(u16::from_le_bytes([*lo, *hi]))),
        _ => 0.0,
    }
}

/// [`scale_bits`] of the two scales in the four bytes of `b` (zeros if `b` is short): one word read.
#[inline(always)]
#[allow(dead_code)] // where the int8 kernel rescales in its own epilogue
pub fn scale_bits_pair(b: &[u8]) -> [f32; 2] {
    match b {
        [_, _, _, _, ..] => {
            // Each half's 15 low bits at bits 13..28: one mask for both (`magnitude_bits` of each
            // half); the word read as one (unaligned) load, which LLVM splits into bytes otherwise.
            const BITS: u32 = 0x7fff << 13;
            let w = u32::from_le(bytemuck::pod_read_unaligned(&b[..4]));
            [w << 13 & BITS, w >> 3 & BITS].map(f32::from_bits)
        }
        _ => [0.0; 2],
    }
}

/// The low 15 bits of `h` (an `f16` without its sign) moved into an `f32`'s exponent and mantissa.
#[inline(always)]
fn magnitude_bits(h: u32) -> f32 {
    f32::from_bits((h & 0x7fff) << 13)
}

/// The smallest `f16` scale not below `s` (so `max|w| / scale` never exceeds the integer range),
/// as an `f32`; `None` if `s` is not positive or beyond the `f16` range.
#[cfg(any(feature = "std", feature = "encode", test))]
pub fn scale_up(s: f32) -> Option<f32> {
    let h = half::f16::from_f32(s);
    let h = if h.to_f32() < s {
        half::f16::from_bits(h.to_bits() + 1)
    } else {
        h
    };
    let up = h.to_f32();
    (s > 0.0 && up.is_finite() && up > 0.0).then_some(up)
}

/// How a tensor's values are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DType {
    /// IEEE-754 binary32, little-endian.
    F32,
    /// IEEE-754 binary16, little-endian; computed in `f32`.
    F16,
    /// Symmetric int8 with one scale per row: `w = q * scale[row]`.
    I8,
    /// Symmetric int4 in groups of [`I4_GROUP`] along each row, two per byte (low nibble first), each row
    /// padded to whole bytes, one scale per group: `w = q * scale[row][group]`.
    I4,
    /// Symmetric int8 in groups of [`I8_GROUP`] along each row, row-major, one scale per group:
    /// `w = q * scale[row][group]`. Added after `I4`, so older blobs read as before.
    I8G,
}

impl DType {
    /// Every storage type, in declaration (and postcard variant) order.
    pub const ALL: [DType; 5] = [DType::F32, DType::F16, DType::I8, DType::I4, DType::I8G];

    /// Bytes of one row of `cols` values (int4: two per byte), `None` on overflow.
    pub const fn row_bytes(self, cols: usize) -> Option<usize> {
        match self {
            DType::F32 => cols.checked_mul(4),
            DType::F16 => cols.checked_mul(2),
            DType::I8 | DType::I8G => Some(cols),
            DType::I4 => Some(cols.div_ceil(2)),
        }
    }

    /// Bytes of the row sums a `[rows, _]` tensor of this dtype may store after its scales
    /// ([`ROW_SUM_BYTES`] per row for `I8`; 0 for the others, which store none), `None` on overflow.
    pub fn row_sums_len(self, rows: usize) -> Option<usize> {
        match self {
            DType::I8 => rows.checked_mul(ROW_SUM_BYTES),
            _ => Some(0),
        }
    }

    /// Bytes of values of a `[rows, cols]` tensor, `None` on overflow.
    pub fn data_len(self, rows: usize, cols: usize) -> Option<usize> {
        rows.checked_mul(self.row_bytes(cols)?)
    }

    /// Number of scales of a `[rows, cols]` tensor, `None` on overflow.
    pub fn n_scales(self, rows: usize, cols: usize) -> Option<usize> {
        match self {
            DType::F32 | DType::F16 => Some(0),
            DType::I8 => Some(rows),
            DType::I4 | DType::I8G => rows.checked_mul(self.groups(cols)),
        }
    }

    /// The width of a scale's group along a row (`cols` for one scale per row, 0 without scales).
    pub const fn group(self, cols: usize) -> usize {
        match self {
            DType::F32 | DType::F16 => 0,
            DType::I8 => cols,
            DType::I4 => I4_GROUP,
            DType::I8G => I8_GROUP,
        }
    }

    /// Scales per row of `cols` values: `ceil(cols / group)` for the grouped types.
    pub const fn groups(self, cols: usize) -> usize {
        match self {
            DType::I4 | DType::I8G => cols.div_ceil(self.group(cols)),
            DType::I8 => 1,
            DType::F32 | DType::F16 => 0,
        }
    }

    /// Whether values are integers with scales (`i8`, `i4`, `i8g`), which meet quantised activations
    /// in the integer kernels.
    pub const fn integer(self) -> bool {
        !matches!(self, DType::F32 | DType::F16)
    }

    /// Short lower-case name (`f32`, `f16`, `i8`, `i4`, `i8g`), as the CLI spells it.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I8 => "i8",
            DType::I4 => "i4",
            DType::I8G => "i8g",
        }
    }

    /// The crate feature that reads matrices of this type (`weights-f32`, ...).
    pub const fn feature(self) -> &'static str {
        match self {
            DType::F32 => "weights-f32",
            DType::F16 => "weights-f16",
            DType::I8 => "weights-i8",
            DType::I4 => "weights-i4",
            DType::I8G => "weights-i8g",
        }
    }

    /// Whether this build reads matrices of this type (its [`DType::feature`] is enabled).
    pub const fn compiled(self) -> bool {
        match self {
            DType::F32 => cfg!(feature = "weights-f32"),
            DType::F16 => cfg!(feature = "weights-f16"),
            DType::I8 => cfg!(feature = "weights-i8"),
            DType::I4 => cfg!(feature = "weights-i4"),
            DType::I8G => cfg!(feature = "weights-i8g"),
        }
    }
}

/// How activations are computed at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Activations {
    /// `f32` activations and an `f32` KV cache.
    F32,
    /// int8 activations quantised per token (W8A8 matmuls with i32 accumulation) and an int8 KV cache
    /// with one scale per position and head.
    I8,
    /// int16 activations quantised per token (`scale = max|x| / 32767`: the inputs of the matmuls and
    /// the queries; W8A16 on the same `SMLAD` kernel, whose lanes are 16-bit anyway) and the int8 KV
    /// cache of [`Activations::I8`]. Added after `I8`, so older blobs read as before.
    I16,
    /// [`Activations::I16`] with an int16 KV cache (one scale `max|x| / 32767` per position and
    /// head; scores and mix summed exactly in `i64`): twice the int8 cache's values in RAM.
    I16Kv16,
    /// Integer-only arithmetic ([`crate::integer`]): int8 weights, an int16 residual stream, int8
    /// matmul inputs, queries, keys and values with fixed scales calibrated at conversion (the blob's
    /// integer plan), integer norms, softmax and activation; `f32` only for the logits' last product
    /// and for hooks. For cores without an FPU.
    Integer,
}

impl Activations {
    /// Every activation arithmetic, in declaration (and postcard variant) order.
    pub const ALL: [Activations; 5] = [
        Activations::F32,
        Activations::I8,
        Activations::I16,
        Activations::I16Kv16,
        Activations::Integer,
    ];

    /// Short lower-case name (`f32`, `i8`, `i16`, `i16+kv16`, `integer`).
    pub const fn name(self) -> &'static str {
        match self {
            Activations::F32 => "f32",
            Activations::I8 => "i8",
            Activations::I16 => "i16",
            Activations::I16Kv16 => "i16+kv16",
            Activations::Integer => "integer",
        }
    }

    /// The crate feature that computes this way (`activations-f32`, `activations-i8`,
    /// `activations-i16`; `kv-i16` for the int16 KV cache, which implies `activations-i16`;
    /// `arith-integer`).
    pub const fn feature(self) -> &'static str {
        match self {
            Activations::F32 => "activations-f32",
            Activations::I8 => "activations-i8",
            Activations::I16 => "activations-i16",
            Activations::I16Kv16 => "kv-i16",
            Activations::Integer => "arith-integer",
        }
    }

    /// Whether this build computes this way (its [`Activations::feature`] is enabled).
    pub const fn compiled(self) -> bool {
        match self {
            Activations::F32 => cfg!(feature = "activations-f32"),
            Activations::I8 => cfg!(feature = "activations-i8"),
            Activations::I16 => cfg!(feature = "activations-i16"),
            Activations::I16Kv16 => cfg!(feature = "kv-i16"),
            Activations::Integer => cfg!(feature = "arith-integer"),
        }
    }

    /// Whether activations are quantised per token (int8 or int16) and the KV cache is an integer one.
    pub const fn integer(self) -> bool {
        matches!(
            self,
            Activations::I8 | Activations::I16 | Activations::I16Kv16
        )
    }

    /// Whether this is the integer-only arithmetic ([`Activations::Integer`]).
    pub const fn integer_only(self) -> bool {
        matches!(self, Activations::Integer)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn scale_bits_times_the_unit_equal_half_for_every_non_negative_finite_f16() {
        use super::{decode_finite_scale, scale_bits, scale_bits_pair, SCALE_UNIT};
        let factors = [1.0f32, 0.25, 3.7e-3, 1e-30, 1e-40, 6e4, 0.0];
        for h in 0..0x7c00u16 {
            let (b, want) = (h.to_le_bytes(), half::f16::from_bits(h).to_f32());
            assert_eq!(
                decode_finite_scale(&b).to_bits(),
                want.to_bits(),
                "{h:#06x}"
            );
            let pair = [b[0], b[1], 0x34, 0x12];
            assert_eq!(
                scale_bits_pair(&pair)[0].to_bits(),
                scale_bits(&b).to_bits()
            );
            assert_eq!(
                scale_bits_pair(&[0x34, 0x12, b[0], b[1]])[1],
                scale_bits(&b)
            );
            for s in factors {
                let folded = scale_bits(&b) * (s * SCALE_UNIT);
                assert_eq!(folded.to_bits(), (want * s).to_bits(), "{h:#06x} * {s}");
            }
            let negative = (h | 0x8000).to_le_bytes();
            assert_eq!(decode_finite_scale(&negative), want);
        }
        assert!(decode_finite_scale(&0x7e00u16.to_le_bytes()).is_finite());
        assert_eq!(decode_finite_scale(&[1]), 0.0);
    }

    #[test]
    fn widening_equals_half_for_every_f16() {
        for h in 0..=u16::MAX {
            let (want, got) = (half::f16::from_bits(h).to_f32(), super::widen_f16(h));
            if want.is_nan() {
                assert!(got.is_nan(), "{h:#06x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{h:#06x}");
            }
        }
    }
}
