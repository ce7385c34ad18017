//! The walk over a row's scale groups, shared by the grouped types (`i4`, `i8g`): the columns
//! `c0 .. c0 + n` cut at every multiple of the group width, each piece summed exactly in `i32`, then
//! `total += sum_g * s[g]` in order in `f32` (and the caller multiplies by the input's scale).

/// `sum_g acc(start_g, stop_g) * scale(g)` over the pieces `start_g .. stop_g` of columns
/// `c0 .. c0 + n` that fall in one group of `group` columns each (group `g = start_g / group`), added
/// in order from 0. `group` 0 gives 0.
#[inline(always)]
pub fn sum(
    c0: usize,
    n: usize,
    group: usize,
    mut acc: impl FnMut(usize, usize) -> i32,
    scale: impl Fn(usize) -> f32,
) -> f32 {
    let (mut total, mut start, end) = (0.0f32, c0, c0.saturating_add(n));
    if group == 0 {
        return total;
    }
    while start < end {
        let stop = end.min((start / group + 1) * group);
        total += acc(start, stop) as f32 * scale(start / group);
        start = stop;
    }
    total
}

/// `sum_g (sum_{c in g} w(c) * x[c - c0]) * scale(g)` over the groups met by columns
/// `c0 .. c0 + x.len()`, in `f32`: each product rounded and added in column order, each group's sum
/// scaled and added in order (an integer matrix against `f32` inputs).
#[inline(always)]
pub fn sum_f32(
    c0: usize,
    x: &[f32],
    group: usize,
    w: impl Fn(usize) -> f32,
    scale: impl Fn(usize) -> f32,
) -> f32 {
    let (mut total, mut acc) = (0.0f32, 0.0f32);
    let mut g = c0 / group.max(1);
    for (i, &xi) in x.iter().enumerate() {
        let c = c0 + i;
        if c / group.max(1) != g {
            total += acc * scale(g);
            acc = 0.0;
            g = c / group.max(1);
        }
        acc += w(c) * xi;
    }
    total + acc * scale(g)
}

/// The bytes of a grouped matrix as the kernels read them, little-endian words, when they can:
/// `data` word-aligned on a little-endian target, `cols` a positive multiple of `group`, and `lanes`
/// (the activations' lane words, two values each) covering every column; else `None`.
#[inline(always)]
pub fn kernel_words(data: &[u8], cols: usize, group: usize, lanes: usize) -> Option<&[u32]> {
    let fits = cfg!(target_endian = "little")
        && cols != 0
        && group != 0
        && cols % group == 0
        && lanes == cols / 2;
    bytemuck::try_cast_slice(data).ok().filter(|_| fits)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pieces_stop_at_group_edges() {
        let mut pieces = std::vec::Vec::new();
        let total = super::sum(
            5,
            12,
            8,
            |a, b| {
                pieces.push((a, b));
                (b - a) as i32
            },
            |g| (g + 1) as f32,
        );
        assert_eq!(pieces, [(5, 8), (8, 16), (16, 17)]);
        assert_eq!(total, 3.0 + 8.0 * 2.0 + 3.0);
        assert_eq!(super::sum(0, 4, 0, |_, _| 1, |_| 1.0), 0.0);
    }
}
