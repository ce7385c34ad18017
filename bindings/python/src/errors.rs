//! Errors as Python exceptions: the `microlens` command's one-line message, as `OSError` when a file
//! could not be read or written or a device link failed, `ValueError` otherwise.

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::PyErr;

/// `e` as the exception Python code catches.
pub fn to_py(e: anyhow::Error) -> PyErr {
    let message = microlens_host::excerpt::one_line(&format!("{e:#}"));
    match e.chain().any(|c| c.is::<std::io::Error>()) {
        true => PyOSError::new_err(message),
        false => PyValueError::new_err(message),
    }
}

/// `Result<T>` to `PyResult<T>`.
pub trait OrPy<T> {
    /// The value, or the error as a Python exception.
    fn or_py(self) -> pyo3::PyResult<T>;
}

impl<T> OrPy<T> for anyhow::Result<T> {
    fn or_py(self) -> pyo3::PyResult<T> {
        self.map_err(to_py)
    }
}

/// `e`, an error of a device link (a port that does not open, a timeout, a refusal), as `OSError`
/// with the command's one-line message.
pub fn device_error(e: anyhow::Error) -> PyErr {
    PyOSError::new_err(microlens_host::excerpt::one_line(&format!("{e:#}")))
}
