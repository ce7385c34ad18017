//! A TransformerLens state dict in memory: TL names to row-major `f32` tensors in TL shapes
//! (`W_Q` is `[n_heads, d_model, d_head]`, `W_U` is `[d_model, d_vocab_out]`, ...).

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

/// A dense row-major `f32` tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Dimensions, outermost first (empty for a scalar).
    pub shape: Vec<usize>,
    /// `shape.iter().product()` values.
    pub data: Vec<f32>,
}

impl Tensor {
    /// A tensor from its shape and values; errors if they disagree.
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Result<Self> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            bail!("shape {shape:?} needs {n} values, got {}", data.len());
        }
        Ok(Tensor { shape, data })
    }

    /// All zeros.
    pub fn zeros(shape: Vec<usize>) -> Self {
        let n = shape.iter().product();
        Tensor {
            shape,
            data: vec![0.0; n],
        }
    }
}

/// TL name -> tensor, sorted by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateDict {
    tensors: BTreeMap<String, Tensor>,
}

impl StateDict {
    /// An empty state dict.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces `name`.
    pub fn insert(&mut self, name: impl Into<String>, tensor: Tensor) {
        self.tensors.insert(name.into(), tensor);
    }

    /// Removes and returns `name`.
    pub fn remove(&mut self, name: &str) -> Option<Tensor> {
        self.tensors.remove(name)
    }

    /// Whether `name` is present.
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The tensor `name`, or an error naming it.
    pub fn get(&self, name: &str) -> Result<&Tensor> {
        self.tensors
            .get(name)
            .with_context(|| format!("missing tensor {name}"))
    }

    /// The tensor `name` mutably, or an error naming it.
    pub fn get_mut(&mut self, name: &str) -> Result<&mut Tensor> {
        self.tensors
            .get_mut(name)
            .with_context(|| format!("missing tensor {name}"))
    }

    /// Every `(name, tensor)`, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.tensors.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether there are no tensors.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

impl FromIterator<(String, Tensor)> for StateDict {
    fn from_iter<I: IntoIterator<Item = (String, Tensor)>>(iter: I) -> Self {
        StateDict {
            tensors: iter.into_iter().collect(),
        }
    }
}
