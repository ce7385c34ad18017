//! HF GPT-2 names -> TransformerLens names and shapes, as TL's `convert_gpt2_weights`: Conv1D weights are
//! already `[in, out]`; `c_attn` is `[Q | K | V]` along its output axis, each split into heads; `W_U` is
//! `lm_head.weight` transposed, or `W_E` transposed when tied (absent); `b_U` is zero; `W_pos` is cut to
//! `n_ctx` rows. The block parameters are a name table ([`BLOCK`]), as TransformerLens writes its
//! conversion.

use std::collections::BTreeMap;

use anyhow::{ensure, Context, Result};
use microlens::Config;

use crate::import::layout::transpose;
use crate::import::state_dict::{StateDict, Tensor};

/// Whether the names are HF GPT-2's (`wte.weight`, optionally under `transformer.`).
pub(super) fn is_hf_gpt2<'a>(mut names: impl Iterator<Item = &'a String>) -> bool {
    names.any(|n| n == "wte.weight" || n == "transformer.wte.weight")
}

/// HF's attention buffers (`attn.bias` causal mask, `attn.masked_bias`), not parameters.
pub(super) fn is_buffer(name: &str) -> bool {
    let name = name.strip_prefix("transformer.").unwrap_or(name);
    name.starts_with("h.") && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"))
}

/// The HF tensors, taken one by one with their shape checked.
struct HfTensors(BTreeMap<String, Tensor>);

impl HfTensors {
    fn take(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let t = self
            .0
            .remove(name)
            .with_context(|| format!("missing tensor {name} (HF GPT-2)"))?;
        ensure!(
            t.shape == shape,
            "tensor {name} has shape {:?}, the config needs {shape:?}",
            t.shape
        );
        Ok(t.data)
    }
}

/// `[rows, cols]` columns `c0..c0 + h*d` as TL's `[h, rows, d]`: `out[h][r][i] = x[r][c0 + h*d + i]`.
fn split_heads(x: &[f32], rows: usize, cols: usize, c0: usize, h: usize, d: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(h * rows * d);
    for head in 0..h {
        for r in 0..rows {
            out.extend_from_slice(&x[r * cols + c0 + head * d..r * cols + c0 + (head + 1) * d]);
        }
    }
    out
}

/// A dimension of the config, as the name table writes shapes.
#[derive(Clone, Copy, Debug)]
enum Dim {
    /// `d_model`.
    M,
    /// `d_mlp`.
    F,
    /// `n_heads`.
    H,
    /// `d_head`.
    D,
    /// `n_heads * d_head`.
    A,
    /// `3 * n_heads * d_head` (`c_attn`'s `[Q | K | V]`).
    A3,
}

/// How an HF tensor becomes TL tensors.
#[derive(Clone, Copy, Debug)]
enum Transform {
    /// The same values in the TL shape (Conv1D weights are already `[in, out]`).
    Reshape,
    /// `c_attn.weight`'s `[Q | K | V]` output columns, each split into heads: `W_Q`, `W_K`, `W_V`.
    SplitQkvWeights,
    /// `c_attn.bias` cut into thirds: `b_Q`, `b_K`, `b_V`.
    SplitQkvBiases,
}

/// One row of the name table: an HF parameter of block `l` (under `h.{l}.`), its shape, the TL name
/// (under `blocks.{l}.`; a prefix completed by `Q`, `K`, `V` for the splits), the TL shape.
struct Row {
    hf: &'static str,
    hf_shape: &'static [Dim],
    tl: &'static str,
    tl_shape: &'static [Dim],
    transform: Transform,
}

const fn row(
    hf: &'static str,
    hf_shape: &'static [Dim],
    tl: &'static str,
    tl_shape: &'static [Dim],
    transform: Transform,
) -> Row {
    Row {
        hf,
        hf_shape,
        tl,
        tl_shape,
        transform,
    }
}

use Dim::{A, A3, D, F, H, M};
use Transform::{Reshape, SplitQkvBiases, SplitQkvWeights};

/// Every parameter of a block, in the order they are read (TransformerLens's `convert_gpt2_weights`).
const BLOCK: [Row; 12] = [
    row("ln_1.weight", &[M], "ln1.w", &[M], Reshape),
    row("ln_1.bias", &[M], "ln1.b", &[M], Reshape),
    row("ln_2.weight", &[M], "ln2.w", &[M], Reshape),
    row("ln_2.bias", &[M], "ln2.b", &[M], Reshape),
    row(
        "attn.c_attn.weight",
        &[M, A3],
        "attn.W_",
        &[H, M, D],
        SplitQkvWeights,
    ),
    row(
        "attn.c_attn.bias",
        &[A3],
        "attn.b_",
        &[H, D],
        SplitQkvBiases,
    ),
    row(
        "attn.c_proj.weight",
        &[A, M],
        "attn.W_O",
        &[H, D, M],
        Reshape,
    ),
    row("attn.c_proj.bias", &[M], "attn.b_O", &[M], Reshape),
    row("mlp.c_fc.weight", &[M, F], "mlp.W_in", &[M, F], Reshape),
    row("mlp.c_fc.bias", &[F], "mlp.b_in", &[F], Reshape),
    row("mlp.c_proj.weight", &[F, M], "mlp.W_out", &[F, M], Reshape),
    row("mlp.c_proj.bias", &[M], "mlp.b_out", &[M], Reshape),
];

/// The final LayerNorm: `(HF name, TL name)`, both `[d_model]`.
const FINAL: [(&str, &str); 2] = [("ln_f.weight", "ln_final.w"), ("ln_f.bias", "ln_final.b")];

/// The config's dimensions.
struct Dims {
    m: usize,
    f: usize,
    h: usize,
    d: usize,
}

impl Dims {
    fn size(&self, dim: Dim) -> usize {
        match dim {
            M => self.m,
            F => self.f,
            H => self.h,
            D => self.d,
            A => self.h * self.d,
            A3 => 3 * self.h * self.d,
        }
    }

    fn shape(&self, dims: &[Dim]) -> Vec<usize> {
        dims.iter().map(|&dim| self.size(dim)).collect()
    }
}

/// Inserts one TL tensor.
fn insert(sd: &mut StateDict, name: String, shape: Vec<usize>, data: Vec<f32>) -> Result<()> {
    sd.insert(name, Tensor::new(shape, data)?);
    Ok(())
}

/// Converts the parameters of block `l` by the [`BLOCK`] table.
fn convert_block(hf: &mut HfTensors, sd: &mut StateDict, dims: &Dims, l: usize) -> Result<()> {
    let (a, h, d, m) = (dims.h * dims.d, dims.h, dims.d, dims.m);
    for r in &BLOCK {
        let data = hf.take(&format!("h.{l}.{}", r.hf), &dims.shape(r.hf_shape))?;
        let (tl, shape) = (format!("blocks.{l}.{}", r.tl), dims.shape(r.tl_shape));
        match r.transform {
            Reshape => insert(sd, tl, shape, data)?,
            SplitQkvWeights => {
                for (i, x) in ["Q", "K", "V"].iter().enumerate() {
                    let w = split_heads(&data, m, 3 * a, i * a, h, d);
                    insert(sd, format!("{tl}{x}"), shape.clone(), w)?;
                }
            }
            SplitQkvBiases => {
                for (i, x) in ["Q", "K", "V"].iter().enumerate() {
                    let b = data[i * a..(i + 1) * a].to_vec();
                    insert(sd, format!("{tl}{x}"), shape.clone(), b)?;
                }
            }
        }
    }
    Ok(())
}

/// Maps an HF GPT-2 state dict (buffers already dropped) to TL names for `cfg`: the embeddings, every
/// block by the [`BLOCK`] table, the final LayerNorm, the unembedding.
pub(super) fn to_tl(tensors: BTreeMap<String, Tensor>, cfg: &Config) -> Result<StateDict> {
    let tensors = tensors.into_iter().map(|(k, v)| {
        (
            k.strip_prefix("transformer.")
                .map(str::to_string)
                .unwrap_or(k),
            v,
        )
    });
    let mut hf = HfTensors(tensors.collect());
    let dims = Dims {
        m: cfg.d_model,
        f: cfg.d_mlp_or_zero(),
        h: cfg.n_heads,
        d: cfg.d_head,
    };
    let (m, v) = (cfg.d_model, cfg.d_vocab);
    let mut sd = StateDict::new();
    let w_e = hf.take("wte.weight", &[v, m])?;
    let wpe =
        hf.0.get("wpe.weight")
            .map(|t| t.shape.clone())
            .unwrap_or_default();
    ensure!(
        wpe.len() == 2 && wpe[0] >= cfg.n_ctx,
        "tensor wpe.weight has shape {wpe:?}, the config needs [>= {}, {m}]",
        cfg.n_ctx
    );
    let w_pos = hf.take("wpe.weight", &wpe)?;
    insert(
        &mut sd,
        "pos_embed.W_pos".into(),
        vec![cfg.n_ctx, m],
        w_pos[..cfg.n_ctx * m].to_vec(),
    )?;
    for l in 0..cfg.n_layers {
        convert_block(&mut hf, &mut sd, &dims, l)?;
    }
    for (hf_name, tl_name) in FINAL {
        insert(&mut sd, tl_name.into(), vec![m], hf.take(hf_name, &[m])?)?;
    }
    // Tied unembedding: HF stores no lm_head.weight, it is wte.weight.
    let lm_head = if hf.0.contains_key("lm_head.weight") {
        hf.take("lm_head.weight", &[v, m])?
    } else {
        w_e.clone()
    };
    insert(
        &mut sd,
        "unembed.W_U".into(),
        vec![m, v],
        transpose([1, v, m], &lm_head),
    )?;
    insert(&mut sd, "unembed.b_U".into(), vec![v], vec![0.0; v])?;
    insert(&mut sd, "embed.W_E".into(), vec![v, m], w_e)?;
    if let Some(name) = hf.0.keys().next() {
        anyhow::bail!("unexpected tensor {name} in an HF GPT-2 checkpoint (not a parameter of a model with this config)");
    }
    Ok(sd)
}
