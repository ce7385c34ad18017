//! A vector added to or multiplied into every row, with a backward pass that sums the rows in one pass.
//!
//! candle's `broadcast_add`/`broadcast_mul` backward reduces over the leading dims with a division and
//! a modulo per element (its fast path is for trailing dims only): a quarter of a training step went
//! there (biases, positions, LayerNorm's `w` and `b`). These ops give the same values and gradients.

use anyhow::Result;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Shape, Tensor};

/// `x + b` for every row: `x [..., k]`, `b [k]` (f32).
pub fn add_rows(x: &Tensor, b: &Tensor) -> Result<Tensor> {
    Ok(x.contiguous()?.apply_op2(&b.contiguous()?, Rows::Add)?)
}

/// `x * w` for every row: `x [..., k]`, `w [k]` (f32).
pub fn mul_rows(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    Ok(x.contiguous()?.apply_op2(&w.contiguous()?, Rows::Mul)?)
}

/// Which row operation.
#[derive(Clone, Copy)]
enum Rows {
    Add,
    Mul,
}

/// The contiguous f32 data of a storage.
fn f32s<'a>(storage: &'a CpuStorage, layout: &Layout) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("row ops need f32")
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("row ops need contiguous tensors")
    };
    Ok(&data[start..end])
}

impl CustomOp2 for Rows {
    fn name(&self) -> &'static str {
        match self {
            Rows::Add => "add-rows",
            Rows::Mul => "mul-rows",
        }
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (x, v) = (f32s(s1, l1)?, f32s(s2, l2)?);
        let k = v.len();
        if k == 0 || l1.dims().last() != Some(&k) || l2.dims().len() != 1 {
            candle_core::bail!("row op: {:?} with {:?}", l1.dims(), l2.dims())
        }
        let mut out = x.to_vec();
        for row in out.chunks_exact_mut(k) {
            match self {
                Rows::Add => row.iter_mut().zip(v).for_each(|(o, &b)| *o += b),
                Rows::Mul => row.iter_mut().zip(v).for_each(|(o, &w)| *o *= w),
            }
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }

    /// Add: `dx = g`, `db = sum_rows g`. Mul: `dx = g * w`, `dw = sum_rows (g * x)`.
    fn bwd(
        &self,
        x: &Tensor,
        v: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        Ok(match self {
            Rows::Add => (Some(grad.clone()), Some(grad.apply_op1_no_bwd(&SumRows)?)),
            Rows::Mul => {
                let dx = grad.apply_op2_no_bwd(v, &Rows::Mul)?;
                let dv = (&grad * x)?.apply_op1_no_bwd(&SumRows)?;
                (Some(dx), Some(dv))
            }
        })
    }
}

/// `[..., k] -> [k]`: the sum of the rows, in row order.
struct SumRows;

impl CustomOp1 for SumRows {
    fn name(&self) -> &'static str {
        "sum-rows"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = f32s(storage, layout)?;
        let k = *layout.dims().last().unwrap_or(&0);
        if k == 0 {
            candle_core::bail!("sum-rows of {:?}", layout.dims())
        }
        let mut out = vec![0f32; k];
        for row in x.chunks_exact(k) {
            out.iter_mut().zip(row).for_each(|(o, &r)| *o += r);
        }
        Ok((CpuStorage::F32(out), Shape::from(k)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Same values and gradients as candle's broadcast ops.
    #[test]
    fn match_candles_broadcast_ops() -> Result<()> {
        let x: Vec<f32> = (0..24).map(|k| ((k * 7 % 11) as f32 - 5.0) * 0.3).collect();
        let x = Var::from_tensor(&Tensor::from_vec(x, (2, 3, 4), &Device::Cpu)?)?;
        let v = Var::from_tensor(&Tensor::new(&[0.5f32, -1.0, 2.0, 0.25], &Device::Cpu)?)?;
        let w = Tensor::from_vec(
            (0..24).map(|k| (k % 5) as f32).collect::<Vec<_>>(),
            (2, 3, 4),
            &Device::Cpu,
        )?;
        let close = |a: &Tensor, b: &Tensor| -> Result<f32> {
            Ok((a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?)
        };
        for (ours, theirs) in [
            (
                add_rows(&x, &v)?,
                x.as_tensor().broadcast_add(v.as_tensor())?,
            ),
            (
                mul_rows(&x, &v)?,
                x.as_tensor().broadcast_mul(v.as_tensor())?,
            ),
        ] {
            assert_eq!(close(&ours, &theirs)?, 0.0);
            let g_ours = (&ours * &w)?.sum_all()?.backward()?;
            let g_theirs = (&theirs * &w)?.sum_all()?.backward()?;
            for var in [x.as_tensor(), v.as_tensor()] {
                assert!(close(g_ours.get(var).unwrap(), g_theirs.get(var).unwrap())? < 1e-5);
            }
        }
        Ok(())
    }
}
