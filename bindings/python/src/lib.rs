//! `microlens._native`: the compiled half of the `microlens` Python package. It calls the core crate's
//! forward pass and `microlens-host`'s converter and analyses (no maths of its own); the Python half
//! (`python/microlens`) adds TransformerLens's calling conventions (names filters, the cache mapping).

use pyo3::prelude::*;

mod analyses;
mod cache;
mod convert;
mod device;
mod errors;
mod model;
mod tokens;

/// The module `microlens._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<model::Model>()?;
    m.add_class::<device::Device>()?;
    m.add_function(wrap_pyfunction!(convert::convert, m)?)?;
    m.add_function(wrap_pyfunction!(analyses::fidelity, m)?)?;
    m.add_function(wrap_pyfunction!(model::canonical_name, m)?)?;
    Ok(())
}
