//! Strided byte stores: `q[i * stride] = one(x[i])` for every value whose slot `q` holds (none for a
//! `stride` of 0), the KV cache's int8 writes. [`store_stepped`] steps through the slice (no raw
//! pointers: the portable targets'); [`store_unchecked`] tests the bounds once per call and writes
//! four values per pass (the others').

/// [`store_unchecked`]'s values through the slice's own stepping.
#[cfg(any(
    test,
    microlens_arch = "portable",
    microlens_arch = "armv7m",
    microlens_arch = "armv6m",
    microlens_arch = "rv32im"
))]
pub(crate) fn store_stepped(x: &[f32], q: &mut [i8], stride: usize, one: impl Fn(f32) -> i8) {
    if stride > 0 {
        q.iter_mut()
            .step_by(stride)
            .zip(x)
            .for_each(|(q, &x)| *q = one(x));
    }
}

/// `q[i * stride] = one(x[i])` for every `i` whose slot `q` holds, four values per pass, one bounds
/// test per call.
#[cfg(not(any(
    microlens_arch = "portable",
    microlens_arch = "armv7m",
    microlens_arch = "armv6m",
    microlens_arch = "rv32im"
)))]
#[allow(unsafe_code)]
#[inline(always)]
pub(crate) fn store_unchecked(x: &[f32], q: &mut [i8], stride: usize, one: impl Fn(f32) -> i8) {
    // Values `i < n` have `i * stride <= (ceil(len / stride) - 1) * stride < len`.
    let n = match stride {
        0 => 0,
        _ => x.len().min(q.len().div_ceil(stride)),
    };
    let x = &x[..n];
    let p = q.as_mut_ptr();
    let fours = x.chunks_exact(4);
    let rest = fours.remainder();
    let mut at = 0;
    for x4 in fours {
        let one = |k: usize| one(x4[k]);
        let (v0, v1, v2, v3) = (one(0), one(1), one(2), one(3));
        // SAFETY: these are values `i < n` at `i * stride < q.len()` (above).
        unsafe {
            *p.add(at) = v0;
            *p.add(at + stride) = v1;
            *p.add(at + 2 * stride) = v2;
            *p.add(at + 3 * stride) = v3;
        }
        at += 4 * stride;
    }
    for &x in rest {
        // SAFETY: as above.
        unsafe { *p.add(at) = one(x) };
        at += stride;
    }
}
