//! LLaMA-family checkpoints -> TransformerLens names and shapes. Their matrices are `nn.Linear` weights
//! (`[out, in]`), which is the blob layout ([`microlens::tensors`]), so each one becomes its TL tensor
//! by [`blob_to_tl`]; they have no biases, and TL's `convert_llama_weights` gives them zero ones.
//! HF `LlamaForCausalLM` names are a table here ([`HF_BLOCK`]); llama2.c's `.bin` files are read by
//! [`super::llama2c`] into the same [`LinearWeights`].

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};
use microlens::tensors::Catalogue;
use microlens::{Config, TensorId, TensorKind};

use crate::import::layout::{blob_to_tl, tl_shape};
use crate::import::state_dict::{StateDict, Tensor};

/// The weights of a LLaMA-shaped model in blob layout (`[rows, cols]` of [`TensorKind::shape`]), by
/// tensor: norms, matrices, and the unembedding (`None`: tied to `W_E`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinearWeights {
    /// Every tensor read, in blob layout.
    pub tensors: BTreeMap<(usize, usize), Vec<f32>>,
}

/// A key for [`LinearWeights::tensors`] (kind index, layer).
fn key(id: TensorId) -> (usize, usize) {
    (id.kind as usize, id.layer)
}

impl LinearWeights {
    /// Adds tensor `id`'s blob-layout values.
    pub fn insert(&mut self, id: TensorId, values: Vec<f32>) {
        self.tensors.insert(key(id), values);
    }

    /// The TL state dict of `cfg`: every tensor read, in TL shape, zero biases, `W_U = W_E^T` when the
    /// unembedding was not read (tied), and an error for a missing or wrongly sized tensor.
    pub fn into_state_dict(mut self, cfg: &Config) -> Result<StateDict> {
        if !self
            .tensors
            .contains_key(&key(TensorId::global(TensorKind::WU)))
        {
            let w_e = self
                .tensors
                .get(&key(TensorId::global(TensorKind::WE)))
                .cloned()
                .context("missing the token embedding")?;
            self.insert(TensorId::global(TensorKind::WU), w_e);
        }
        let mut sd = StateDict::new();
        for id in Catalogue::new(cfg).ids() {
            let [rows, cols] = id.shape(cfg);
            let data = match self.tensors.remove(&key(id)) {
                Some(data) => {
                    ensure!(
                        data.len() == rows * cols,
                        "tensor {id} has {} values, the config needs {rows} x {cols}",
                        data.len()
                    );
                    blob_to_tl(id.kind, cfg, &data)
                }
                None if is_bias(id.kind) => vec![0.0; rows * cols],
                None => bail!("missing tensor {id}"),
            };
            sd.insert(id.to_string(), Tensor::new(tl_shape(id.kind, cfg), data)?);
        }
        Ok(sd)
    }
}

/// The bias kinds, which LLaMA-family checkpoints do not have (zero in TL).
fn is_bias(kind: TensorKind) -> bool {
    matches!(
        kind,
        TensorKind::BQ
            | TensorKind::BK
            | TensorKind::BV
            | TensorKind::BO
            | TensorKind::BIn
            | TensorKind::BOut
            | TensorKind::BU
    )
}

/// Whether the names are HF Llama's (`model.embed_tokens.weight`).
pub(super) fn is_hf_llama<'a>(mut names: impl Iterator<Item = &'a String>) -> bool {
    names.any(|n| n == "model.embed_tokens.weight")
}

/// HF's rotary frequency buffers (older transformers saved them), not parameters.
pub(super) fn is_buffer(name: &str) -> bool {
    name.ends_with(".rotary_emb.inv_freq")
}

/// The parameters of HF Llama block `l` (under `model.layers.{l}.`) and their kinds.
const HF_BLOCK: [(&str, TensorKind); 9] = [
    ("input_layernorm.weight", TensorKind::Ln1W),
    ("self_attn.q_proj.weight", TensorKind::WQ),
    ("self_attn.k_proj.weight", TensorKind::WK),
    ("self_attn.v_proj.weight", TensorKind::WV),
    ("self_attn.o_proj.weight", TensorKind::WO),
    ("post_attention_layernorm.weight", TensorKind::Ln2W),
    ("mlp.gate_proj.weight", TensorKind::WGate),
    ("mlp.up_proj.weight", TensorKind::WIn),
    ("mlp.down_proj.weight", TensorKind::WOut),
];

/// The parameters outside the blocks.
const HF_GLOBAL: [(&str, TensorKind); 3] = [
    ("model.embed_tokens.weight", TensorKind::WE),
    ("model.norm.weight", TensorKind::LnFinalW),
    ("lm_head.weight", TensorKind::WU),
];

/// Maps an HF Llama state dict (buffers dropped) to TL names for `cfg` (as TL's `convert_llama_weights`:
/// the weights as they are, HF's rotary halves order included; zero biases; a tied `lm_head` is `W_E`).
pub(super) fn to_tl(mut tensors: BTreeMap<String, Tensor>, cfg: &Config) -> Result<StateDict> {
    let mut w = LinearWeights::default();
    let mut take = |name: String, id: TensorId, w: &mut LinearWeights| -> Result<()> {
        let shape = match id.kind.is_matrix() {
            true => id.shape(cfg).to_vec(),
            false => vec![cfg.d_model],
        };
        let Some(t) = tensors.remove(&name) else {
            ensure!(
                id.kind == TensorKind::WU,
                "missing tensor {name} (HF Llama)"
            );
            return Ok(());
        };
        ensure!(
            t.shape == shape,
            "tensor {name} has shape {:?}, the config needs {shape:?}",
            t.shape
        );
        w.insert(id, t.data);
        Ok(())
    };
    for (name, kind) in HF_GLOBAL {
        take(name.into(), TensorId::global(kind), &mut w)?;
    }
    for l in 0..cfg.n_layers {
        for (name, kind) in HF_BLOCK {
            take(
                format!("model.layers.{l}.{name}"),
                TensorId::layer(kind, l),
                &mut w,
            )?;
        }
    }
    if let Some(name) = tensors.keys().next() {
        bail!("unexpected tensor {name} in an HF Llama checkpoint (not a parameter of a model with this config)");
    }
    w.into_state_dict(cfg)
}
