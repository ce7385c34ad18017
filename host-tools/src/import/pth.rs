//! PyTorch `.pth` files (`torch.save` zip format) holding a state dict: the pickle is parsed with
//! `candle_core::pickle`, the storages are read from the zip and gathered with their strides.
//!
//! candle's own `PthTensors` prints a line on stderr for every tensor whose storage it cannot represent
//! (the bool `attn.mask` buffers of every TL state dict), so the state dict is walked here instead, and
//! such tensors come back as [`RawTensor::Other`] for the caller to skip or refuse.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};

use anyhow::{anyhow, bail, Context, Result};
use candle_core::pickle::{Object, Stack, TensorInfo};
use candle_core::DType;

use super::{decode_floats, FloatDType, RawTensor};
use crate::import::state_dict::Tensor;

type Zip<'a> = zip::ZipArchive<Cursor<&'a [u8]>>;

/// Every tensor of the state dict pickled in a `.pth` zip file.
pub(super) fn read(bytes: &[u8]) -> Result<BTreeMap<String, RawTensor>> {
    let mut zip = Zip::new(Cursor::new(bytes)).context("not a readable zip (.pth) file")?;
    let pkl = zip
        .file_names()
        .filter_map(|n| n.ok())
        .find(|n| n.ends_with("data.pkl"))
        .map(|n| n.into_owned())
        .context("no data.pkl in the .pth file (not a torch.save file)")?;
    let dir = std::path::PathBuf::from(pkl.trim_end_matches(".pkl"));
    let mut pickle = Vec::new();
    zip.by_name(&pkl)?
        .read_to_end(&mut pickle)
        .context("cannot read the pickle in the .pth file")?;
    let items = state_dict_items(&pickle)?;
    let mut out = BTreeMap::new();
    for (key, value) in items {
        let Object::Unicode(name) = key.clone() else {
            continue;
        };
        match value.into_tensor_info(key, &dir) {
            Ok(Some(info)) => {
                let raw = match float_dtype(info.dtype) {
                    Some(d) => RawTensor::Float(
                        read_tensor(&mut zip, &info, d)
                            .with_context(|| format!("tensor {name}"))?,
                    ),
                    None => RawTensor::Other(format!("{:?} {:?}", info.dtype, info.layout.dims())),
                };
                out.insert(name, raw);
            }
            Ok(None) => {} // not a tensor (e.g. the OrderedDict's `_metadata`)
            Err(e) => {
                out.insert(name, RawTensor::Other(format!("unreadable ({e})")));
            }
        }
    }
    Ok(out)
}

/// The `(key, value)` items of the state dict a `.pth` file's pickle holds, after the bounded walk of
/// [`super::pickle_check`].
pub(super) fn state_dict_items(pickle: &[u8]) -> Result<Vec<(Object, Object)>> {
    super::pickle_check::check(pickle)?;
    let mut stack = Stack::empty();
    stack
        .read_loop(&mut Cursor::new(pickle))
        .context("cannot parse the pickle in the .pth file")?;
    let Object::Dict(items) = stack.finalize()? else {
        bail!("the .pth file does not hold a state dict (a dict of tensors)");
    };
    Ok(items)
}

fn float_dtype(dtype: DType) -> Option<FloatDType> {
    match dtype {
        DType::F16 => Some(FloatDType::F16),
        DType::BF16 => Some(FloatDType::BF16),
        DType::F32 => Some(FloatDType::F32),
        DType::F64 => Some(FloatDType::F64),
        _ => None,
    }
}

/// Reads a tensor's storage and gathers its elements in row-major order: element `idx` is
/// `storage[offset + sum_k idx_k stride_k]`.
fn read_tensor(zip: &mut Zip<'_>, info: &TensorInfo, dtype: FloatDType) -> Result<Tensor> {
    let mut bytes = Vec::new();
    zip.by_name(&info.path)
        .with_context(|| format!("missing storage {}", info.path))?
        .read_to_end(&mut bytes)?;
    let storage = decode_floats(dtype, &bytes);
    let dims = info.layout.dims().to_vec();
    let strides = info.layout.stride();
    let offset = info.layout.start_offset() / info.dtype.size_in_bytes();
    let n: usize = dims.iter().product();
    let mut data = Vec::with_capacity(n);
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..n {
        let at = offset + idx.iter().zip(strides).map(|(i, s)| i * s).sum::<usize>();
        data.push(
            *storage
                .get(at)
                .ok_or_else(|| anyhow!("storage {} too short", info.path))?,
        );
        for k in (0..dims.len()).rev() {
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Tensor::new(dims, data)
}
