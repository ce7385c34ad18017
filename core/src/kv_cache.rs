//! The KV cache: keys and values of every layer and past position, in a caller-provided buffer, either
//! `f32` or int8 with one `f32` scale per position and head (`k ~ q * scale`), as the model's
//! [`Activations`] say.
//!
//! The cache also computes what attention reads from it, so each storage type keeps its own arithmetic:
//! the scores `q . k_j / attn_scale` (int8 x int8 with `i32` accumulation for an int8 cache) and the mix
//! `z = sum_j p_j v_j` (for an int8 cache in fixed point, [`crate::quant::mix`]: int16 weights
//! `p_j * scale_j / S` times int8 values, summed exactly, times `S`). The integer-only arithmetic keeps
//! int8 keys and values at fixed scales and computes its own attention ([`KvCache::integer_layer`]).

use crate::arch::{dot_lanes16, kv_heads8, sum_to_f32, sums4_f32};
use crate::blob::Activations;
use crate::config::Config;
use crate::error::Error;
use crate::math::rows;
use crate::quant::activations::{quantize_one16, quantize_strided, scale16, scale8, Q_MAX};
use crate::quant::linear::quantize_as;
use crate::quant::quantized::lanes_in_order;
use crate::quant::{attention_loops, dot4, int8, mix};

/// Whether this build has the `f32` and the int8 cache (features `activations-f32`, and
/// `activations-i8` or `activations-i16`).
const F32: bool = Activations::F32.compiled();
const I8: bool = Activations::I8.compiled() || Activations::I16.compiled();
/// Whether this build has the int16 cache (feature `kv-i16`).
const I16: bool = Activations::I16Kv16.compiled();

/// Where the keys and values live: `[layer][pos][head * d_head]` each, except integer values, which
/// are transposed, `[layer][head][d_head][pos]` (a row of positions per output of the mix); integer
/// scales `[layer][head][pos]`. An int16 cache keeps its values' bytes in `I8`'s slices, twice as long
/// ([`KvCache::int16`]): two variants, so the enum needs no tag beside its pointers.
#[derive(Debug)]
enum Store<'b> {
    F32 {
        k: &'b mut [f32],
        v: &'b mut [f32],
    },
    I8 {
        k: &'b mut [i8],
        v: &'b mut [i8],
        k_scale: &'b mut [f32],
        v_scale: &'b mut [f32],
    },
}

/// Keys and values of past positions, per key/value head (the `head` of its methods: with grouped-query
/// attention, query head `h` reads key/value head [`Config::kv_head`]).
#[derive(Debug)]
pub struct KvCache<'b> {
    store: Store<'b>,
    n_ctx: usize,
    /// Key/value heads (`n_key_value_heads`).
    n_heads: usize,
    d_head: usize,
}

fn take<'b, T>(rest: &mut &'b mut [T], n: usize) -> &'b mut [T] {
    let (head, tail) = core::mem::take(rest).split_at_mut(n);
    *rest = tail;
    head
}

impl<'b> KvCache<'b> {
    /// `f32` words a full-context cache needs, `d_kv = n_key_value_heads * d_head` wide per position and
    /// side. `f32`: `2 * n_layers * n_ctx * d_kv`. int8: the values packed four per word, `ceil(2 *
    /// n_layers * n_ctx * d_kv / 4)`, plus `2 * n_layers * n_ctx * n_key_value_heads` scales: a quarter
    /// of the `f32` cache plus `4 / d_head` bytes per value; int16: the values two per word and the same
    /// scales. `usize::MAX` (a length no buffer has) where that overflows, as it can on 32-bit targets.
    pub const fn len(cfg: &Config, activations: Activations) -> usize {
        let positions = cfg.n_ctx;
        let per_side = cfg
            .n_layers
            .saturating_mul(positions)
            .saturating_mul(cfg.d_kv());
        let both = per_side.saturating_mul(2);
        let scales = cfg
            .n_layers
            .saturating_mul(positions)
            .saturating_mul(cfg.n_key_value_heads)
            .saturating_mul(2);
        let len = match activations {
            Activations::F32 => both,
            Activations::I16Kv16 => both.div_ceil(2).saturating_add(scales),
            Activations::I8 | Activations::I16 => both.div_ceil(4).saturating_add(scales),
            Activations::Integer => both.div_ceil(4),
        };
        if per_side == usize::MAX || both == usize::MAX {
            usize::MAX
        } else {
            len
        }
    }

    /// A cache for `cfg` in `buf` (at least [`KvCache::len`] words).
    pub(crate) fn new(
        cfg: &Config,
        activations: Activations,
        buf: &'b mut [f32],
    ) -> Result<Self, Error> {
        if !activations.compiled() {
            return Err(Error::Unsupported {
                feature: activations.feature(),
            });
        }
        let needed = Self::len(cfg, activations);
        if buf.len() < needed {
            return Err(Error::BufferTooSmall {
                what: "KV cache",
                needed,
                found: buf.len(),
            });
        }
        // `needed` fits, so every product below does.
        let per_side = cfg.n_layers * cfg.n_ctx * cfg.d_kv();
        let mut rest = &mut buf[..needed];
        let store = match activations {
            Activations::F32 => Store::F32 {
                k: take(&mut rest, per_side),
                v: take(&mut rest, per_side),
            },
            Activations::Integer => {
                let mut values: &mut [i8] = bytemuck::cast_slice_mut(rest);
                Store::I8 {
                    k: take(&mut values, per_side),
                    v: take(&mut values, per_side),
                    k_scale: &mut [],
                    v_scale: &mut [],
                }
            }
            Activations::I8 | Activations::I16 | Activations::I16Kv16 => {
                let n_scales = cfg.n_layers * cfg.n_ctx * cfg.n_key_value_heads;
                let k_scale = take(&mut rest, n_scales);
                let v_scale = take(&mut rest, n_scales);
                let mut values: &mut [i8] = bytemuck::cast_slice_mut(rest);
                let bytes = match activations {
                    Activations::I16Kv16 => 2 * per_side,
                    _ => per_side,
                };
                Store::I8 {
                    k: take(&mut values, bytes),
                    v: take(&mut values, bytes),
                    k_scale,
                    v_scale,
                }
            }
        };
        Ok(KvCache {
            store,
            n_ctx: cfg.n_ctx,
            n_heads: cfg.n_key_value_heads,
            d_head: cfg.d_head,
        })
    }

    /// Whether the integer cache holds int16 values: its key bytes are twice its scales times `d_head`.
    fn int16(&self) -> bool {
        match &self.store {
            Store::I8 { k, k_scale, .. } if I16 => {
                !k_scale.is_empty() && k.len() > k_scale.len() * self.d_head
            }
            _ => false,
        }
    }

    /// The integer-only arithmetic's int8 keys and values of `layer` (`[pos][d_kv]` each, at the
    /// plan's fixed scales): `None` for another cache.
    #[cfg(feature = "arith-integer")]
    pub(crate) fn integer_layer(&mut self, layer: usize) -> Option<(&mut [i8], &mut [i8])> {
        let span = self.n_ctx * self.n_heads * self.d_head;
        match &mut self.store {
            Store::I8 {
                k, v, k_scale: [], ..
            } => {
                let at = layer.checked_mul(span)?..;
                let k = k.get_mut(at.clone())?.get_mut(..span)?;
                let v = v.get_mut(at)?.get_mut(..span)?;
                Some((k, v))
            }
            _ => None,
        }
    }

    /// Index of `(layer, pos, head)` in the scale arrays; times `d_head`, the start of its values.
    fn slot(&self, layer: usize, pos: usize, head: usize) -> usize {
        (layer * self.n_ctx + pos) * self.n_heads + head
    }

    fn range(&self, layer: usize, pos: usize, head: usize) -> core::ops::Range<usize> {
        let start = self.slot(layer, pos, head) * self.d_head;
        start..start + self.d_head
    }

    /// Start of the key and value scales of `head` at `layer` (`n_ctx` positions); times `d_head`, the
    /// start of its transposed int8 values (`d_head` rows of `n_ctx` positions).
    fn value_scales(&self, layer: usize, head: usize) -> usize {
        (layer * self.n_heads + head) * self.n_ctx
    }

    /// Stores the keys and values of all key/value heads (`d_kv` each) at `pos` of `layer`; an int8
    /// cache quantises each head's key and value with its own scale `max|x| / 127`.
    pub(crate) fn store(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) {
        let (dh, n_ctx) = (self.d_head, self.n_ctx.max(1));
        let int16 = self.int16();
        let done = match int16 {
            true => 0,
            false => self.store_heads8(layer, pos, k, v),
        };
        for h in done..self.n_heads {
            let r = self.range(layer, pos, h);
            let v_s = self.value_scales(layer, h) + pos;
            let (kh, vh) = (head_of(k, h, dh), head_of(v, h, dh));
            match &mut self.store {
                Store::F32 { k, v } if F32 => {
                    copy(kh, k.get_mut(r.clone()));
                    copy(vh, v.get_mut(r));
                }
                Store::I8 {
                    k,
                    v,
                    k_scale,
                    v_scale,
                } if I16 && int16 => {
                    let (k, v) = (as_i16(k), as_i16(v));
                    let key = k.get_mut(r).unwrap_or(&mut []);
                    store_i16(kh, key.iter_mut(), k_scale.get_mut(v_s));
                    let value = v.get_mut((v_s - pos) * dh + pos..).unwrap_or(&mut []);
                    store_i16(vh, value.iter_mut().step_by(n_ctx), v_scale.get_mut(v_s));
                }
                Store::I8 {
                    k,
                    v,
                    k_scale,
                    v_scale,
                } if I8 => {
                    let key = k.get_mut(r).unwrap_or(&mut []);
                    store_i8(kh, key, 1, k_scale.get_mut(v_s));
                    let value = v.get_mut((v_s - pos) * dh + pos..).unwrap_or(&mut []);
                    store_i8(vh, value, n_ctx, v_scale.get_mut(v_s));
                }

                _ => {}
            }
        }
    }

    crate::arch::on_assembly_targets! {
        inline(never), else inline(always);
        /// An int8 cache's keys and values of every head at `pos` of `layer`, each side in one call of the
        /// assembly (DSP cores with an FPU: `crate::arch::kv_heads8`, what [`store_i8`] writes head by
        /// head); returns how many heads, from the first, it wrote (0 on other targets).
        fn store_heads8(&mut self, layer: usize, pos: usize, k: &[f32], v: &[f32]) -> usize {
            if crate::arch::KV_HEADS8 && I8 {
                let (dh, n_ctx, da) = (self.d_head, self.n_ctx, self.n_heads * self.d_head);
                let (key, first) = (self.range(layer, pos, 0).start, self.value_scales(layer, 0));
                if let Store::I8 {
                    k: kq,
                    v: vq,
                    k_scale,
                    v_scale,
                } = &mut self.store
                {
                    let side = |x: &[f32], q: Option<&mut [i8]>, stride, s: Option<&mut [f32]>| {
                        let x = x.get(..da).unwrap_or(x);
                        match (q, s) {
                            (Some(q), Some(s)) => kv_heads8(x, dh, q, stride, s, n_ctx, Q_MAX),
                            _ => 0,
                        }
                    };
                    let done_k = side(k, kq.get_mut(key..), 1, k_scale.get_mut(first + pos..));
                    let values = vq.get_mut(first * dh + pos..);
                    let done_v = side(v, values, n_ctx, v_scale.get_mut(first + pos..));
                    return done_k.min(done_v);
                }
            }
            0
        }
    }

    /// Attention scores of `head` at `layer` over positions `0 .. n` (at most `buf.len()`):
    /// `buf[j] = (q . k_j) / attn_scale`, returning their maximum ([`crate::math::softmax::max`]);
    /// `buf[n..]` is scratch. An int8 cache quantises `q` (one head, `d_head`) into `scratch`, to int8
    /// or (`wide_q`, W8A16) int16, and computes `(acc_j * (s_q * s_kj)) / attn_scale` with `acc_j`
    /// exact (an int16 cache: int16 queries, `i64` sums).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scores(
        &self,
        layer: usize,
        head: usize,
        q: &[f32],
        wide_q: bool,
        scratch: &mut [i8],
        attn_scale: f32,
        buf: &mut [f32],
        n: usize,
    ) -> f32 {
        let dh = self.d_head;
        let n = n.min(buf.len());
        let mut max = f32::NEG_INFINITY;
        let mut keep = |s: f32| {
            max = crate::math::max_of(core::iter::once(s), max);
            s
        };
        match &self.store {
            Store::F32 { k, .. } if F32 => {
                // Four keys per pass over the query, `n_heads * d_head` apart.
                let row = &mut buf[..n];
                let keys = from(k, self.slot(layer, 0, head) * dh);
                let q = q.get(..dh).unwrap_or(q);
                rows::dot4_f32(keys, self.n_heads * dh, q, row);
                row.iter_mut().for_each(|s| *s = keep(*s / attn_scale));
            }
            Store::I8 { k, k_scale, .. } if I16 && self.int16() => {
                let row = &mut buf[..n];
                let nq = q.len().min(dh);
                let s_q = quantize_as(&q[..nq], true, scratch).scale;
                // The query's values in order, as the keys lie: two per word for `SMLALD`.
                let words = scratch.get_mut(..nq / 4 * 8).unwrap_or(&mut []);
                lanes_in_order(bytemuck::try_cast_slice_mut(words).unwrap_or(&mut []));
                let qv = scratch.get(..2 * nq).unwrap_or(&[]);
                let qv: &[i16] = bytemuck::try_cast_slice(qv).unwrap_or(&[]);
                let qw: &[u32] = bytemuck::try_cast_slice(&qv[..qv.len() / 2 * 2]).unwrap_or(&[]);
                let (stride, little) = (self.n_heads * dh, cfg!(target_endian = "little"));
                let keys = from(as_i16_ref(k), self.slot(layer, 0, head) * dh);
                let scales = from(k_scale, self.value_scales(layer, head));
                let one = |j: usize| {
                    let key = keys.get(j * stride..).unwrap_or(&[]);
                    let key = key.get(..dh).unwrap_or(&[]);
                    match bytemuck::try_cast_slice::<i16, u32>(key) {
                        Ok(kw) if qv.len() == dh && kw.len() == qw.len() && little => {
                            dot_lanes16(kw, qw)
                        }
                        // An odd `d_head` (or a misaligned slot): value by value, the same sum.
                        _ => key
                            .iter()
                            .zip(qv)
                            .fold(0i64, |acc, (&k, &q)| acc + k as i64 * q as i64),
                    }
                };
                // Four keys per pass over the query's words ([`sums4_f32`]) where the keys are whole
                // words, the same sums as `f32`; the keys after them one by one.
                let whole = dh % 2 == 0 && qv.len() == dh && 2 * qw.len() == dh && little;
                let words = match whole {
                    true => bytemuck::try_cast_slice::<i16, u32>(&keys[..keys.len() / 2 * 2]),
                    false => Ok(&[][..]),
                };
                let m = row.len().min(scales.len());
                let done = match words {
                    Ok(w) if whole => sums4_f32(w, stride / 2, qw, &mut row[..m]),
                    _ => 0,
                };
                let (row4, row) = row[..m].split_at_mut(done);
                let (scales4, scales) = scales.split_at(done);
                for (s, s_k) in row4.iter_mut().zip(scales4) {
                    *s = keep(*s * (s_q * s_k) / attn_scale);
                }
                for (j, (s, s_k)) in row.iter_mut().zip(scales).enumerate() {
                    *s = keep(sum_to_f32(one(done + j)) * (s_q * s_k) / attn_scale);
                }
            }
            Store::I8 { k, k_scale, .. } if I8 => {
                let wide_q = wide_q && Activations::I16.compiled();
                let qq = quantize_as(q, wide_q, scratch);
                let first = self.slot(layer, 0, head);
                let stride = self.n_heads * dh;
                let keys = from(k, first * dh);
                let keys4: &[u8] = bytemuck::cast_slice(keys);
                let fits = !wide_q || dh <= int8::WIDE_CHUNK;
                let whole = dh % 4 == 0 && qq.lanes.len() == dh / 2 && fits;
                // Four keys at a time, `stride` apart, one pass over the query for all four; the
                // last `n % 4` keys in one more quad when `buf` has room and the cache the rows
                // after them (stale positions of the layer: their sums are dropped, each kept sum
                // is the same exact integer), else after the quads.
                let up = n.next_multiple_of(4);
                let room = up <= buf.len() && up <= self.n_ctx;
                let quads = match whole {
                    true if room => up,
                    true => n - n % 4,
                    false => 0,
                };
                dot4::dot4_strided(
                    keys4,
                    stride,
                    qq.lanes,
                    bytemuck::cast_slice_mut(&mut buf[..quads]),
                );
                let (row4, rest) = buf[..n].split_at_mut(quads.min(n));
                let scales = from(k_scale, self.value_scales(layer, head));
                let (scales4, scales) = scales.split_at(row4.len().min(scales.len()));
                let mut scales = scales.iter();
                keep(attention_loops::scores(row4, scales4, qq.scale, attn_scale));
                let mut score = |acc: f32, s_k: Option<&f32>| {
                    keep(acc * (qq.scale * s_k.copied().unwrap_or(0.0)) / attn_scale)
                };
                // With int16 queries (no cheap single-key dot product), the last keys as one more
                // quad when the cache holds the rows after them but `buf` has no room.
                let next = keys4.get(quads * stride..).unwrap_or(&[]);
                if wide_q && whole && !rest.is_empty() && next.len() >= 3 * stride + dh {
                    let mut sums = [0i32; 4];
                    dot4::dot4_strided(next, stride, qq.lanes, &mut sums);
                    for (s, acc) in rest.iter_mut().zip(sums) {
                        *s = score(acc as f32, scales.next());
                    }
                    return max;
                }
                for (j, s) in rest.iter_mut().enumerate() {
                    let key = keys.get((quads + j) * stride..).unwrap_or(&[]);
                    let key = key.get(..dh).unwrap_or(&[]);
                    let acc = match wide_q {
                        true => int8::dot_wide_f32(bytemuck::cast_slice(key), qq.wide, 0),
                        false => int8::dot_i8_f32(qq.q, key),
                    };
                    *s = score(acc, scales.next());
                }
            }
            _ => {}
        }
        max
    }

    /// `z = sum_j (pattern[j] / sum) v_j` for `head` at `layer`, positions in ascending order (`sum` 1
    /// for a pattern already normalised, else the softmax's sum: the same division). An int8 cache
    /// computes it in fixed point from the weights `pattern[j] / sum * s_vj` ([`mix::mix`]), using
    /// `pattern` as scratch: its contents are unspecified afterwards.
    pub(crate) fn mix(
        &self,
        layer: usize,
        head: usize,
        pattern: &mut [f32],
        sum: f32,
        z: &mut [f32],
    ) {
        let (stride, first) = (self.n_heads * self.d_head, self.slot(layer, 0, head));
        let start = first * self.d_head;
        match &self.store {
            Store::F32 { v, .. } if F32 => {
                let weights = pattern.iter().map(|p| p / sum);
                weighted_sum(z, weights, from(v, start), stride)
            }
            Store::I8 { v, v_scale, .. } if I8 || I16 => {
                let first = self.value_scales(layer, head);
                let scales = from(v_scale, first);
                let max = mix::weights(pattern, sum, scales);
                let rows = first * self.d_head;
                match I16 && self.int16() {
                    true => mix::mix16(pattern, max, from(as_i16_ref(v), rows), self.n_ctx, z),
                    false => mix::mix(pattern, max, from(v, rows), self.n_ctx, z),
                }
            }
            _ => {}
        }
    }
}

/// The int16 values whose bytes `b` holds (empty if `b` were misaligned, which the cache's `f32`
/// buffer never is).
fn as_i16(b: &mut [i8]) -> &mut [i16] {
    bytemuck::try_cast_slice_mut(b).unwrap_or(&mut [])
}

/// [`as_i16`], read-only.
fn as_i16_ref(b: &[i8]) -> &[i16] {
    bytemuck::try_cast_slice(b).unwrap_or(&[])
}

/// `v[start..]` (empty if out of range).
fn from<T>(v: &[T], start: usize) -> &[T] {
    v.get(start..).unwrap_or(&[])
}

/// Elements of `z` kept in registers at a time by [`weighted_sum`] (a head of the shipped model; narrower
/// heads take its plain loop).
const BLOCK: usize = 16;

/// `z[i] = sum_j w_j * values[j * stride + i]` over the weights `w_j` in order (positions whose
/// values lie outside `values` add nothing): every `z[i]` starts at 0 and adds its terms in `j` order,
/// [`BLOCK`] elements at a time held in registers.
fn weighted_sum(
    z: &mut [f32],
    weights: impl Iterator<Item = f32> + Clone,
    values: &[f32],
    stride: usize,
) {
    let start = z.len() - z.len() % BLOCK;
    let (blocks, rest) = z.split_at_mut(start);
    for (b, zb) in blocks.chunks_exact_mut(BLOCK).enumerate() {
        let mut acc = [0.0f32; BLOCK];
        let mut at = b * BLOCK;
        for w in weights.clone() {
            let Some(v) = values.get(at..at + BLOCK) else {
                break;
            };
            acc.iter_mut().zip(v).for_each(|(a, &v)| *a += w * v);
            at += stride;
        }
        zb.copy_from_slice(&acc);
    }
    rest.iter_mut().for_each(|z| *z = 0.0);
    if rest.is_empty() {
        return;
    }
    let mut at = start;
    for w in weights {
        let Some(v) = values.get(at..at + rest.len()) else {
            break;
        };
        rest.iter_mut().zip(v).for_each(|(z, &v)| *z += w * v);
        at += stride;
    }
}

/// Head `h`'s slice of an `n_heads * d_head` vector (empty if out of range).
fn head_of(x: &[f32], h: usize, d_head: usize) -> &[f32] {
    x.get(h * d_head..(h + 1) * d_head).unwrap_or(&[])
}

fn copy(src: &[f32], dst: Option<&mut [f32]>) {
    if let Some(dst) = dst {
        dst.iter_mut().zip(src).for_each(|(d, s)| *d = *s);
    }
}

/// Quantises `x` into `q` as int16 (one value per element of `x`, as far as `q` goes) with the scale
/// `max|x| / 32767`, stored in `scale`; nothing if the scale has no slot.
fn store_i16<'q>(x: &[f32], q: impl Iterator<Item = &'q mut i16>, scale: Option<&mut f32>) {
    if let Some(scale) = scale {
        let inv;
        (*scale, inv) = scale16(x);
        q.zip(x).for_each(|(q, &x)| *q = quantize_one16(x, inv));
    }
}

/// Quantises `x` into `q`, `stride` apart (one value per element of `x`, as far as `q` goes), with
/// the scale `max|x| / 127`, stored in `scale`; nothing if the scale has no slot.
#[inline]
fn store_i8(x: &[f32], q: &mut [i8], stride: usize, scale: Option<&mut f32>) {
    if let Some(scale) = scale {
        let inv;
        (*scale, inv) = scale8(x);
        quantize_strided(x, inv, q, stride);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::activations::{quantize, quantize16};
    use crate::testing::lcg;
    use std::{vec, vec::Vec};

    #[test]
    fn int16_cache_scores_are_the_exact_sums() {
        // `d_head` a multiple of four, two more, and odd (the value-by-value path).
        for d_head in [16, 6, 5] {
            let cfg = Config::new(1, 2 * d_head, 2, d_head, 8, 7, None);
            let mut buf = vec![0.0f32; KvCache::len(&cfg, Activations::I16Kv16)];
            let mut kv = KvCache::new(&cfg, Activations::I16Kv16, &mut buf).unwrap();
            let mut state = lcg(0x1616_0000 + d_head as u32);
            let mut next = || (state() >> 8) as f32 / 4_194_304.0 - 2.0;
            for pos in 0..7 {
                let (k, v): (Vec<f32>, Vec<f32>) =
                    (0..2 * d_head).map(|_| (next(), next())).unzip();
                kv.store(0, pos, &k, &v);
            }
            let q: Vec<f32> = (0..d_head).map(|_| next()).collect();
            for head in 0..2 {
                let mut scratch = vec![0u32; d_head];
                let mut row = vec![0.0f32; 7];
                let scratch = bytemuck::cast_slice_mut(&mut scratch);
                kv.scores(0, head, &q, true, scratch, 2.0, &mut row, 7);
                let mut words = vec![0u32; d_head];
                let qq = quantize16(&q, bytemuck::cast_slice_mut(&mut words));
                let Store::I8 { k, k_scale, .. } = &kv.store else {
                    unreachable!()
                };
                let keys: &[i16] = bytemuck::cast_slice(k);
                for (j, s) in row.iter().enumerate() {
                    let start = kv.range(0, j, head).start;
                    let acc: i64 = (0..d_head)
                        .map(|i| keys[start + i] as i64 * qq.wide.get(i) as i64)
                        .sum();
                    let s_k = k_scale[kv.value_scales(0, head) + j];
                    let want = acc as f32 * (qq.scale * s_k) / 2.0;
                    assert_eq!(
                        s.to_bits(),
                        want.to_bits(),
                        "d_head {d_head} head {head} key {j}"
                    );
                }
            }
        }
    }

    #[test]
    fn scores_are_the_exact_sums_whatever_the_last_keys_take() {
        // 11 positions: the last `len % 4` keys take one more quad of the kernel where the buffer
        // has room, else (int16 queries) the extra quad while the cache holds three rows after them,
        // and the single-key path at the end of the cache.
        let cfg = Config::new(2, 32, 2, 16, 8, 11, None);
        let mut buf = vec![0.0f32; KvCache::len(&cfg, Activations::I16)];
        let mut kv = KvCache::new(&cfg, Activations::I16, &mut buf).unwrap();
        let mut state = lcg(0x5eed_1234);
        let mut next = || (state() >> 8) as f32 / 4_194_304.0 - 2.0;
        for layer in 0..2 {
            for pos in 0..11 {
                let (k, v): (Vec<f32>, Vec<f32>) = (0..32).map(|_| (next(), next())).unzip();
                kv.store(layer, pos, &k, &v);
            }
        }
        let mut scratch = vec![0u32; 16];
        let cases = (0..2).flat_map(|l| (0..2).flat_map(move |h| (1..=11).map(move |n| (l, h, n))));
        for ((layer, head, len), (wide, room)) in
            cases.flat_map(|c| [(true, 0), (true, 3), (false, 0), (false, 3)].map(move |w| (c, w)))
        {
            let q: Vec<f32> = (0..16).map(|_| next()).collect();
            let mut row = vec![7.0f32; len + room];
            let scratch = bytemuck::cast_slice_mut(&mut scratch);
            let max = kv.scores(layer, head, &q, wide, scratch, 4.0, &mut row, len);
            let mut words = [0u32; 8];
            let qq = match wide {
                true => quantize16(&q, bytemuck::cast_slice_mut(&mut words)),
                false => quantize(&q, bytemuck::cast_slice_mut(&mut words)),
            };
            let Store::I8 { k, k_scale, .. } = &kv.store else {
                unreachable!()
            };
            let row = &row[..len];
            for (j, s) in row.iter().enumerate() {
                let key = &k[kv.range(layer, j, head)];
                let x = |i: usize| match wide {
                    true => qq.wide.get(i) as i64,
                    false => qq.q[i] as i64,
                };
                let acc: i64 = (0..16).map(|i| key[i] as i64 * x(i)).sum();
                let s_k = k_scale[kv.value_scales(layer, head) + j];
                let want = acc as f32 * (qq.scale * s_k) / 4.0;
                assert_eq!(
                    s.to_bits(),
                    want.to_bits(),
                    "layer {layer} head {head} len {len} wide {wide} room {room} key {j}"
                );
            }
            assert_eq!(max, row.iter().fold(f32::NEG_INFINITY, |m, s| m.max(*s)));
        }
    }
}
