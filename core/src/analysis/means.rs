//! Mean `hook_z` of every head over the positions seen: the reference for mean-ablation.

use crate::hooks::{HookKind, HookPoint, Hooks};

/// Sums `hook_z` of every head into a `[n_layers][n_heads][d_head]` buffer; [`HeadMeans::finish`] turns
/// the sums into means over the positions seen (all sequences run with it).
#[derive(Debug)]
pub struct HeadMeans<'a> {
    sums: &'a mut [f32],
    n_heads: usize,
    count: u32,
}

impl<'a> HeadMeans<'a> {
    /// `f32` words the buffer needs: `n_layers * n_heads * d_head` (`usize::MAX` if that overflows).
    pub const fn len(n_layers: usize, n_heads: usize, d_head: usize) -> usize {
        n_layers.saturating_mul(n_heads).saturating_mul(d_head)
    }

    /// An accumulator over `buf` (at least [`HeadMeans::len`] words; zeroed here).
    pub fn new(buf: &'a mut [f32], n_heads: usize) -> Self {
        buf.fill(0.0);
        HeadMeans {
            sums: buf,
            n_heads,
            count: 0,
        }
    }

    /// Number of positions seen.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The means `[n_layers][n_heads][d_head]` (zeros if nothing was seen), for [`super::HeadAblation::mean`].
    pub fn finish(self) -> &'a [f32] {
        if self.count > 0 {
            let n = self.count as f32;
            self.sums.iter_mut().for_each(|s| *s /= n);
        }
        self.sums
    }
}

impl Hooks for HeadMeans<'_> {
    #[inline]
    fn wants(&self, kind: HookKind) -> bool {
        kind == HookKind::Z
    }

    fn hook(&mut self, p: HookPoint, z: &mut [f32]) {
        if p.kind != HookKind::Z {
            return;
        }
        if p.layer == 0 && p.head == 0 {
            self.count += 1;
        }
        let start = (p.layer * self.n_heads + p.head) * z.len();
        if let Some(sum) = self.sums.get_mut(start..start + z.len()) {
            sum.iter_mut().zip(z.iter()).for_each(|(s, z)| *s += z);
        }
    }
}
