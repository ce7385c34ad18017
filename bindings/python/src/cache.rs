//! What `run_with_cache` hands Python, for the host's model and a device alike: the names asked for
//! (TransformerLens 2.x or 4.x, each mapped to the 2.x name of its activation), and the logits and
//! `{name: array}` dictionary built from activations recorded under their 2.x names.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, Context, Result};
use microlens::HookKinds;
use microlens_host::eval::hook_names;
use numpy::ndarray::{Array3, ArrayD, IxDyn};
use numpy::{IntoPyArray, PyArray3};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::OrPy;

/// The activations a `run_with_cache` call asks for: all (`None` names), or, by 2.x name, the names
/// that asked for each.
pub struct Wanted {
    names: Option<BTreeMap<String, BTreeSet<String>>>,
    /// The model's depth (`ln_final.hook_in` names its last block's output).
    n_layers: usize,
}

impl Wanted {
    /// The activations `names` asks for in a model of `n_layers` layers (all when `None`); an error
    /// for a name that names no activation.
    pub fn new(names: Option<Vec<String>>, n_layers: usize) -> Result<Self> {
        let Some(names) = names else {
            return Ok(Wanted {
                names: None,
                n_layers,
            });
        };
        let mut wanted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for name in names {
            let canonical = hook_names::canonical(&name, n_layers)
                .with_context(|| format!("{name:?} is not a TransformerLens hook name"))?;
            wanted.entry(canonical).or_default().insert(name);
        }
        Ok(Wanted {
            names: Some(wanted),
            n_layers,
        })
    }

    /// Whether the activation of 2.x name `name` is asked for.
    pub fn contains(&self, name: &str) -> bool {
        self.names.as_ref().is_none_or(|w| w.contains_key(name))
    }

    /// The hook kinds of the activations asked for.
    pub fn kinds(&self) -> HookKinds {
        match &self.names {
            None => HookKinds::ALL,
            Some(w) => w
                .keys()
                .filter_map(|n| hook_names::parse(n, self.n_layers))
                .fold(HookKinds::NONE, |k, (kind, _)| k.with(kind)),
        }
    }

    /// The dictionary of `tensors` (2.x name, shape with the batch dimension first, values): each
    /// activation asked for under every name that asked for it (under its 2.x name when all are).
    pub fn dict<'py>(
        &self,
        py: Python<'py>,
        tensors: impl IntoIterator<Item = (String, Vec<usize>, Vec<f32>)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (name, shape, data) in tensors {
            let array = ArrayD::from_shape_vec(IxDyn(&shape), data)
                .map_err(|e| anyhow!("{name}: {e}"))
                .or_py()?
                .into_pyarray(py);
            match &self.names {
                None => dict.set_item(&name, &array)?,
                Some(w) => {
                    for asked in w.get(&name).into_iter().flatten() {
                        dict.set_item(asked, &array)?;
                    }
                }
            }
        }
        Ok(dict)
    }
}

/// Logits `[batch, n_pos, d_vocab_out]` of `data` (sequence after sequence).
pub fn logits<'py>(
    py: Python<'py>,
    batch: usize,
    n_pos: usize,
    data: Vec<f32>,
) -> PyResult<Bound<'py, PyArray3<f32>>> {
    let dv = data.len() / (batch * n_pos).max(1);
    let logits = Array3::from_shape_vec((batch, n_pos, dv), data)
        .map_err(|e| anyhow!("logits: {e}"))
        .or_py()?;
    Ok(logits.into_pyarray(py))
}
