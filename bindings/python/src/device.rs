//! `microlens._native.Device`: a board in serve mode over its serial link (or QEMU's UART socket), as
//! `microlens device` drives it: its logits hash and its own activations, read with the GIL released
//! and handed over as the host's `Model` hands over its own.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Result};
use microlens::{HookKind, Model as Blob};
use microlens_host::device::{check_context, hook_suffixes, Device as Link, Info};
use microlens_host::import::tl_config::to_tl_json;
use numpy::{PyArray3, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::cache::{self, Wanted};
use crate::errors::{device_error, OrPy};
use crate::tokens;

/// A connected device: its link (none once closed), what it said it runs, and its blob, read back
/// once when connecting.
#[pyclass(module = "microlens._native", frozen)]
pub struct Device {
    link: Mutex<Option<Link>>,
    port: String,
    info: Info,
    blob: Box<[u8]>,
}

/// One sequence's logits (`[pos][d_vocab_out]`) and activations (2.x name to shape and values).
type Recorded = (Vec<Vec<f32>>, BTreeMap<String, (Vec<usize>, Vec<f32>)>);

impl Device {
    /// The link, or an error once closed.
    fn with_link<R>(&self, f: impl FnOnce(&mut Link) -> Result<R>) -> Result<R> {
        let mut guard: MutexGuard<'_, Option<Link>> = self
            .link
            .lock()
            .map_err(|_| anyhow!("{}: the device link failed earlier", self.port))?;
        match guard.as_mut() {
            Some(link) => f(link),
            None => bail!("{}: the device is closed", self.port),
        }
    }

    /// Checks every row against the device's model and context (as `microlens device` does).
    fn check(&self, rows: &[Vec<u32>]) -> Result<Blob<'_>> {
        let model = Blob::from_bytes(&self.blob)?;
        tokens::check(&model, rows)?;
        for row in rows {
            check_context(&self.info, row.len())?;
        }
        Ok(model)
    }

    /// The device's logits of `row` from position 0, checked against the hash it keeps: `(logits,
    /// hash)`.
    fn step(link: &mut Link, row: &[u32]) -> Result<(Vec<Vec<f32>>, u64)> {
        link.reset()?;
        let logits = link.step(row)?;
        let hash = link.checked_hash(&logits)?;
        Ok((logits, hash))
    }
}

/// The `info()` dictionary's JSON: the protocol's `Info`, its hook bits as names, its blob hash in hex,
/// its capabilities as a list and the weights' storage type they name.
fn describe(info: &Info) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(info)?;
    let hooks = hook_suffixes(info);
    let features: Vec<&str> = info.features.split(',').filter(|f| !f.is_empty()).collect();
    let weights: Vec<&str> = features
        .iter()
        .filter_map(|f| f.strip_prefix("weights-"))
        .collect();
    let dtype = match weights.is_empty() {
        true => "f32".to_owned(),
        false => weights.join("+"),
    };
    v["hooks"] = hooks.into();
    v["features"] = features.into();
    v["dtype"] = dtype.into();
    v["blob_hash"] = format!("{:016x}", info.blob_hash).into();
    Ok(v)
}

#[pymethods]
impl Device {
    /// Connects to `port` (`tcp:HOST:PORT`, or a serial device at `baud`), each answer awaited at
    /// most `timeout` seconds; asks what it runs and reads its blob back.
    #[new]
    #[pyo3(signature = (port, baud=115_200, timeout=10.0))]
    fn open(py: Python<'_>, port: String, baud: u32, timeout: f64) -> PyResult<Device> {
        if !(timeout > 0.0 && timeout.is_finite()) {
            return Err(PyValueError::new_err(
                "timeout must be a positive number of seconds",
            ));
        }
        py.detach(|| -> Result<Device> {
            let mut link = Link::open(&port, baud, Duration::from_secs_f64(timeout))?;
            let info = link.info()?;
            let blob = link.blob(&info)?.into_boxed_slice();
            Blob::from_bytes(&blob).map_err(|e| anyhow!("{port}: the device's blob: {e}"))?;
            Ok(Device {
                link: Mutex::new(Some(link)),
                port: port.clone(),
                info,
                blob,
            })
        })
        .map_err(device_error)
    }

    /// What the device runs, as JSON (`microlens device info`'s figures).
    fn info_json(&self) -> PyResult<String> {
        Ok(describe(&self.info).or_py()?.to_string())
    }

    /// The config of the device's model under TransformerLens's `cfg.to_dict()` names.
    fn cfg_json(&self) -> PyResult<String> {
        let model = Blob::from_bytes(&self.blob)
            .map_err(anyhow::Error::from)
            .or_py()?;
        Ok(to_tl_json(model.config()).to_string())
    }

    /// The device's blob, as read back when connecting.
    fn blob<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.blob)
    }

    /// `(logits, {name: array})` of `tokens` `[batch, pos]`, each sequence run on the device from
    /// position 0 and its activations read back: as `Model.run_with_cache` gives them.
    #[pyo3(signature = (tokens, names=None))]
    fn run_with_cache<'py>(
        &self,
        py: Python<'py>,
        tokens: PyReadonlyArray2<'py, u32>,
        names: Option<Vec<String>>,
    ) -> PyResult<(Bound<'py, PyArray3<f32>>, Bound<'py, PyDict>)> {
        let rows = tokens::rows(&tokens);
        let cfg = *self.check(&rows).or_py()?.config();
        let wanted = Wanted::new(names, cfg.n_layers).or_py()?;
        // As the host records them: the output projection head by head when `hook_result` is asked for.
        let attn_result = wanted.kinds().contains(HookKind::Result);
        let recorded: Vec<Recorded> = py
            .detach(|| {
                self.with_link(|link| {
                    rows.iter()
                        .map(|row| -> Result<Recorded> {
                            let (logits, _) = Device::step(link, row)?;
                            let cache = link.read_cache(&cfg, row.len(), attn_result, |name| {
                                wanted.contains(name)
                            })?;
                            let tensors = cache.tensors(&cfg, row.len());
                            let tensors: BTreeMap<_, _> = tensors
                                .into_iter()
                                .map(|(name, t)| (name, (t.shape, t.data)))
                                .collect();
                            Ok((logits, tensors))
                        })
                        .collect()
                })
            })
            .map_err(device_error)?;
        let (batch, n_pos) = (rows.len(), rows.first().map_or(0, Vec::len));
        let (logits, tensors) = stack(recorded).or_py()?;
        let dict = wanted.dict(py, tensors)?;
        Ok((cache::logits(py, batch, n_pos, logits)?, dict))
    }

    /// The device's logits hash of each row of `tokens` `[batch, pos]` (16 hex digits, as
    /// `Model.hash` and `microlens device run --hash` give it).
    fn hash(&self, py: Python<'_>, tokens: PyReadonlyArray2<'_, u32>) -> PyResult<Vec<String>> {
        let rows = tokens::rows(&tokens);
        self.check(&rows).or_py()?;
        py.detach(|| {
            self.with_link(|link| {
                rows.iter()
                    .map(|row| -> Result<String> {
                        Ok(format!("{:016x}", Device::step(link, row)?.1))
                    })
                    .collect()
            })
        })
        .map_err(device_error)
    }

    /// Empties the device's KV cache.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.with_link(Link::reset))
            .map_err(device_error)
    }

    /// Closes the link (a closed device's calls raise `OSError`).
    fn close(&self, py: Python<'_>) {
        py.detach(|| {
            if let Ok(mut link) = self.link.lock() {
                *link = None;
            }
        })
    }

    /// Whether the link is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.link.lock().map(|l| l.is_none()).unwrap_or(true)
    }

    /// The port it was opened on.
    #[getter]
    fn port(&self) -> String {
        self.port.clone()
    }
}

/// The sequences' logits and activations stacked: logits `[batch · pos · d_vocab_out]`, each
/// activation `(name, [batch, ...], values)`.
type Stacked = (Vec<f32>, Vec<(String, Vec<usize>, Vec<f32>)>);

/// `recorded`'s sequences stacked along a first, batch dimension.
fn stack(recorded: Vec<Recorded>) -> Result<Stacked> {
    let batch = recorded.len();
    let mut logits = Vec::new();
    let mut tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)> = BTreeMap::new();
    for (i, (row_logits, row_tensors)) in recorded.into_iter().enumerate() {
        logits.extend(row_logits.into_iter().flatten());
        ensure!(
            i == 0 || row_tensors.len() == tensors.len(),
            "the device gave sequence {i} other activations than sequence 0"
        );
        for (name, (shape, data)) in row_tensors {
            let (stacked_shape, values) = tensors.entry(name).or_insert_with(|| {
                let mut s = vec![batch];
                s.extend(&shape);
                (s, Vec::new())
            });
            ensure!(
                stacked_shape[1..] == shape[..],
                "the device gave activations of other shapes in sequence {i}"
            );
            values.extend(data);
        }
    }
    let tensors = tensors
        .into_iter()
        .map(|(name, (shape, data))| (name, shape, data))
        .collect();
    Ok((logits, tensors))
}
