//! Fused causal attention for training, with its backward pass: `z_i = sum_{j<=i} p_ij v_j`,
//! `p_i = softmax_{j<=i}(q_i . k_j / scale)`, for every (sequence, head) of `[batch, head, pos, d_head]`.
//!
//! candle runs the per-head `q k^T` and `p v` products as one small matrix product after another on one
//! core (each is below gemm's threading threshold), plus the masked softmax and their backward passes;
//! this op computes only the causal half, one (sequence, head) per task spread over rayon's pool. Every
//! value is computed by one task in a fixed order, so the result does not depend on the thread count.
//! The pattern is recomputed in the backward pass rather than stored.

use anyhow::Result;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Shape, Tensor};
use rayon::prelude::*;

/// `z = causal_softmax(q k^T / scale) v` over the last two dims of `q`, `k`, `v` (`[..., t, d_head]`, f32).
pub fn causal_attention(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64) -> Result<Tensor> {
    Ok(q.contiguous()?.apply_op3(
        &k.contiguous()?,
        &v.contiguous()?,
        CausalAttention {
            scale: scale as f32,
        },
    )?)
}

#[derive(Clone, Copy)]
struct CausalAttention {
    scale: f32,
}

/// The contiguous f32 data of a storage and its trailing `[t, d]` dims.
fn rows<'a>(
    storage: &'a CpuStorage,
    layout: &Layout,
) -> candle_core::Result<(&'a [f32], usize, usize)> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("causal attention needs f32")
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("causal attention needs contiguous tensors")
    };
    let dims = layout.dims();
    if dims.len() < 2 || dims.iter().any(|&d| d == 0) {
        candle_core::bail!("causal attention needs [..., t, d_head], got {dims:?}")
    }
    Ok((
        &data[start..end],
        dims[dims.len() - 2],
        dims[dims.len() - 1],
    ))
}

/// The causal pattern of one (sequence, head): `p[i * t + j]` for `j <= i`, 0 above the diagonal.
fn pattern(q: &[f32], k: &[f32], t: usize, d: usize, scale: f32, p: &mut [f32]) {
    for i in 0..t {
        let qi = &q[i * d..][..d];
        let row = &mut p[i * t..][..t];
        let mut max = f32::NEG_INFINITY;
        for (j, r) in row[..=i].iter_mut().enumerate() {
            let s = dot(qi, &k[j * d..][..d]) / scale;
            *r = s;
            max = max.max(s);
        }
        let mut sum = 0f32;
        for r in row[..=i].iter_mut() {
            *r = (*r - max).exp();
            sum += *r;
        }
        row[..=i].iter_mut().for_each(|r| *r /= sum);
        row[i + 1..].iter_mut().for_each(|r| *r = 0.0);
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `acc += w * x`.
fn axpy(acc: &mut [f32], w: f32, x: &[f32]) {
    acc.iter_mut().zip(x).for_each(|(a, &x)| *a += w * x);
}

impl CustomOp3 for CausalAttention {
    fn name(&self) -> &'static str {
        "causal-attention"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (q, t, d) = rows(s1, l1)?;
        let (k, _, _) = rows(s2, l2)?;
        let (v, _, _) = rows(s3, l3)?;
        if l1.dims() != l2.dims() || l1.dims() != l3.dims() {
            candle_core::bail!("causal attention: q, k, v shapes differ")
        }
        let mut z = vec![0f32; q.len()];
        let n = t * d;
        z.par_chunks_mut(n).enumerate().for_each(|(g, zg)| {
            let (q, k, v) = (&q[g * n..][..n], &k[g * n..][..n], &v[g * n..][..n]);
            let mut p = vec![0f32; t * t];
            pattern(q, k, t, d, self.scale, &mut p);
            for i in 0..t {
                let zi = &mut zg[i * d..][..d];
                for j in 0..=i {
                    axpy(zi, p[i * t + j], &v[j * d..][..d]);
                }
            }
        });
        Ok((CpuStorage::F32(z), l1.shape().clone()))
    }

    fn bwd(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        grad_res: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let qkv = Tensor::stack(&[q, k, v], 0)?;
        let grads =
            qkv.apply_op2_no_bwd(&grad_res.contiguous()?, &CausalAttentionBackward(*self))?;
        Ok((
            Some(grads.get(0)?),
            Some(grads.get(1)?),
            Some(grads.get(2)?),
        ))
    }
}

/// Gradients of `q`, `k`, `v` from `stack([q, k, v])` and `dz`, returned stacked the same way.
struct CausalAttentionBackward(CausalAttention);

impl CustomOp2 for CausalAttentionBackward {
    fn name(&self) -> &'static str {
        "causal-attention-backward"
    }

    /// `dv_j = sum_i p_ij dz_i`, `ds_ij = p_ij (dz_i . v_j - sum_j' p_ij' dz_i . v_j') / scale`,
    /// `dq_i = sum_j ds_ij k_j`, `dk_j = sum_i ds_ij q_i`.
    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (qkv, t, d) = rows(s1, l1)?;
        let (dz, _, _) = rows(s2, l2)?;
        let len = dz.len();
        if qkv.len() != 3 * len {
            candle_core::bail!("causal attention backward: shape mismatch")
        }
        let (q, rest) = qkv.split_at(len);
        let (k, v) = rest.split_at(len);
        let n = t * d;
        let scale = self.0.scale;
        // One task per (sequence, head) computes its dq, dk, dv block; they are scattered afterwards.
        let blocks: Vec<Vec<f32>> = (0..len / n)
            .into_par_iter()
            .map(|g| {
                let (q, k, v, dz) = (
                    &q[g * n..][..n],
                    &k[g * n..][..n],
                    &v[g * n..][..n],
                    &dz[g * n..][..n],
                );
                let mut p = vec![0f32; t * t];
                pattern(q, k, t, d, scale, &mut p);
                let mut out = vec![0f32; 3 * n];
                let (dq, rest) = out.split_at_mut(n);
                let (dk, dv) = rest.split_at_mut(n);
                let mut ds = vec![0f32; t];
                for i in 0..t {
                    let dzi = &dz[i * d..][..d];
                    let pi = &p[i * t..][..=i];
                    let mut sum = 0f32;
                    for (j, s) in ds[..=i].iter_mut().enumerate() {
                        *s = dot(dzi, &v[j * d..][..d]);
                        sum += pi[j] * *s;
                    }
                    for j in 0..=i {
                        axpy(&mut dv[j * d..][..d], pi[j], dzi);
                        let g = pi[j] * (ds[j] - sum) / scale;
                        axpy(&mut dq[i * d..][..d], g, &k[j * d..][..d]);
                        axpy(&mut dk[j * d..][..d], g, &q[i * d..][..d]);
                    }
                }
                out
            })
            .collect();
        let mut out = vec![0f32; 3 * len];
        for (g, b) in blocks.iter().enumerate() {
            for part in 0..3 {
                out[part * len + g * n..][..n].copy_from_slice(&b[part * n..][..n]);
            }
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Same values and gradients as the composite path (`q k^T`, causal softmax, `p v`).
    #[test]
    fn matches_the_composite_attention() -> Result<()> {
        let (b, h, t, d) = (2, 3, 7, 4);
        let n = b * h * t * d;
        let var = |seed: usize| -> Result<Var> {
            let vals: Vec<f32> = (0..n)
                .map(|i| (((i * 31 + seed * 17) % 23) as f32 - 11.0) * 0.13)
                .collect();
            Ok(Var::from_tensor(&Tensor::from_vec(
                vals,
                (b, h, t, d),
                &Device::Cpu,
            )?)?)
        };
        let (q, k, v) = (var(1)?, var(2)?, var(3)?);
        let w = Tensor::from_vec(
            (0..n).map(|i| (i % 5) as f32 - 2.0).collect::<Vec<_>>(),
            (b, h, t, d),
            &Device::Cpu,
        )?;
        let scale = 2.0;
        let fused = causal_attention(q.as_tensor(), k.as_tensor(), v.as_tensor(), scale)?;
        let scores = q.as_tensor().matmul(&k.as_tensor().t()?)?;
        let reference =
            super::super::causal_softmax::causal_softmax(&scores, scale)?.matmul(v.as_tensor())?;
        let g_fused = (&fused * &w)?.sum_all()?.backward()?;
        let g_ref = (&reference * &w)?.sum_all()?.backward()?;
        let close = |a: &Tensor, b: &Tensor| -> Result<f32> {
            Ok((a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?)
        };
        assert!(close(&fused, &reference)? < 1e-5);
        for x in [&q, &k, &v] {
            assert!(close(g_fused.get(x).unwrap(), g_ref.get(x).unwrap())? < 1e-4);
        }
        Ok(())
    }
}
