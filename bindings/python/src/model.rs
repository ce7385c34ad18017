//! `microlens._native.Model`: a blob held in memory with the host's column-blocked copy of its
//! matrices; forward passes, activation caches, the logits hash and the circuit analyses, each batch
//! row on its own rayon thread with the GIL released.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use microlens::host::HostWeights;
use microlens::{HookKinds, Model as Blob};
use microlens_host::analysis::circuits::{analyse, CircuitOptions, GivenSequence};
use microlens_host::eval::batch_cache::record_batch;
use microlens_host::eval::cache::ActivationCache;
use microlens_host::eval::hook_names;
use microlens_host::eval::run::{par_map, run_with_hooks};
use microlens_host::hash::logits_hash;
use microlens_host::import::tl_config::to_tl_json;
use microlens_host::io::output::Outputs;
use numpy::ndarray::Array3;
use numpy::{IntoPyArray, PyArray3, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::cache::{self, Wanted};
use crate::errors::OrPy;
use crate::tokens;

/// A converted model (a blob): the bytes and the host's blocked copy of its matrices.
#[pyclass(module = "microlens._native", frozen)]
pub struct Model {
    bytes: Box<[u8]>,
    host: HostWeights,
}

impl Model {
    /// The model of blob `bytes` (checked by the core's parser).
    pub fn new(bytes: Vec<u8>) -> Result<Self> {
        let bytes = bytes.into_boxed_slice();
        let host = HostWeights::new(&Blob::from_bytes(&bytes)?);
        Ok(Model { bytes, host })
    }

    /// The core's view of the blob, computing from the blocked copy.
    pub fn blob(&self) -> Result<Blob<'_>> {
        Ok(Blob::from_bytes(&self.bytes)?.with_host(&self.host))
    }

    /// `f` of every row of `rows` on rayon's threads, in row order, after the rows are checked.
    fn per_row<R: Send>(
        &self,
        rows: &[Vec<u32>],
        f: impl Fn(&Blob<'_>, &[u32]) -> Result<R> + Sync + Send,
    ) -> Result<Vec<R>> {
        let model = self.blob()?;
        tokens::check(&model, rows)?;
        par_map(rows, |row| f(&model, row))
    }
}

/// `[batch, pos, width]` of per-row `[pos][width]` logits.
fn stack3(rows: Vec<Vec<Vec<f32>>>) -> Result<Array3<f32>> {
    let (b, p) = (rows.len(), rows.first().map_or(0, Vec::len));
    let w = rows.first().and_then(|r| r.first()).map_or(0, Vec::len);
    let data = rows.into_iter().flatten().flatten().collect();
    Array3::from_shape_vec((b, p, w), data).map_err(|e| anyhow!("logits: {e}"))
}

#[pymethods]
impl Model {
    /// The model of a blob file.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Model> {
        py.detach(|| {
            let bytes = microlens_host::io::files::read_blob(&path)?;
            Model::new(bytes).with_context(|| path.display().to_string())
        })
        .or_py()
    }

    /// The model of blob bytes.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: Vec<u8>) -> PyResult<Model> {
        py.detach(|| Model::new(data)).or_py()
    }

    /// The blob bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.bytes)
    }

    /// Writes the blob to `path` (atomically: a temporary file renamed into place).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| Outputs::new().write(&path, &self.bytes))
            .or_py()
    }

    /// The config as TransformerLens's `cfg.to_dict()` JSON names it (after the processing the blob
    /// had: a folded LayerNorm is `LNPre`).
    fn cfg_json(&self) -> PyResult<String> {
        let model = self.blob().or_py()?;
        Ok(to_tl_json(model.config()).to_string())
    }

    /// Logits `float32 [batch, pos, d_vocab_out]` of `tokens` `[batch, pos]`.
    fn forward<'py>(
        &self,
        py: Python<'py>,
        tokens: PyReadonlyArray2<'py, u32>,
    ) -> PyResult<Bound<'py, PyArray3<f32>>> {
        let rows = tokens::rows(&tokens);
        let logits = py
            .detach(|| self.per_row(&rows, |m, row| run_with_hooks(m, row, &mut ())))
            .or_py()?;
        Ok(stack3(logits).or_py()?.into_pyarray(py))
    }

    /// `(logits, {name: array})` of `tokens` `[batch, pos]`: every activation `names` asks for (all
    /// when `None`; TransformerLens 2.x or 4.x names), each under every name it was asked by, in
    /// TransformerLens's shape with the batch dimension first.
    #[pyo3(signature = (tokens, names=None))]
    fn run_with_cache<'py>(
        &self,
        py: Python<'py>,
        tokens: PyReadonlyArray2<'py, u32>,
        names: Option<Vec<String>>,
    ) -> PyResult<(Bound<'py, PyArray3<f32>>, Bound<'py, PyDict>)> {
        let rows = tokens::rows(&tokens);
        let (wanted, recorded) = py
            .detach(|| {
                let model = self.blob()?;
                let wanted = Wanted::new(names, model.config().n_layers)?;
                tokens::check(&model, &rows)?;
                let recorded =
                    record_batch(&model, &rows, wanted.kinds(), |name| wanted.contains(name))?;
                Ok((wanted, recorded))
            })
            .or_py()?;
        let (batch, n_pos) = (rows.len(), rows.first().map_or(0, Vec::len));
        let tensors = recorded
            .tensors
            .into_iter()
            .map(|t| (t.shape(batch), t))
            .map(|(shape, t)| (t.name, shape, t.data));
        let dict = wanted.dict(py, tensors)?;
        Ok((cache::logits(py, batch, n_pos, recorded.logits)?, dict))
    }

    /// Every activation this model records, each as its names (TransformerLens 2.x first, then 4.x's).
    fn hook_names(&self, py: Python<'_>) -> PyResult<Vec<Vec<String>>> {
        let recorded = py
            .detach(|| {
                let model = self.blob()?;
                let (cache, _) = ActivationCache::record(&model, &[0], HookKinds::ALL)?;
                Ok((cache.tensors(model.config(), 1), model.config().n_layers))
            })
            .or_py()?;
        let (recorded, n_layers) = recorded;
        Ok(recorded
            .keys()
            .map(|n| hook_names::aliases(n, n_layers))
            .collect())
    }

    /// The logits hash of each row of `tokens` `[batch, pos]` (16 hex digits, as
    /// `microlens run --hash` and the firmware print it).
    fn hash(&self, py: Python<'_>, tokens: PyReadonlyArray2<'_, u32>) -> PyResult<Vec<String>> {
        let rows = tokens::rows(&tokens);
        py.detach(|| {
            self.per_row(&rows, |m, row| {
                let logits = run_with_hooks(m, row, &mut ())?;
                Ok(format!(
                    "{:016x}",
                    logits_hash(logits.iter().map(Vec::as_slice))
                ))
            })
        })
        .or_py()
    }

    /// `microlens circuits --json` of this model, as a JSON string: on `sequences` repeated random
    /// sequences of halves of `half` tokens, or on `tokens` repeated.
    #[pyo3(signature = (sequences=8, half=None, seed=0, top=5, tokens=None))]
    fn circuits_json(
        &self,
        py: Python<'_>,
        sequences: usize,
        half: Option<usize>,
        seed: u64,
        top: usize,
        tokens: Option<Vec<u32>>,
    ) -> PyResult<String> {
        py.detach(|| {
            let model = self.blob()?;
            let opts = CircuitOptions {
                given: tokens.map(|body| GivenSequence {
                    prefix: Vec::new(),
                    body,
                }),
                sequences,
                half,
                seed,
                top,
            };
            let report = analyse(&model, &opts)?;
            Ok(microlens_host::report::circuits::to_json(&report).to_string())
        })
        .or_py()
    }
}

/// The TransformerLens 2.x name of a 2.x or 4.x hook name in a model of `n_layers` layers, or `None`.
#[pyfunction]
pub fn canonical_name(name: &str, n_layers: usize) -> Option<String> {
    hook_names::canonical(name, n_layers)
}
