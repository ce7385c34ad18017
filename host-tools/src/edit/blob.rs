//! Reading and rewriting `W_out` in a blob. The blob holds TransformerLens's processed weights; when
//! they were centred (`center_writing_weights`, LN models) every row of `W_out` has mean 0 over
//! `d_model`, and an edit keeps it so: the update's rows are centred too, which changes nothing
//! downstream (every reader of the residual stream is a centring norm) and keeps the blob in the form
//! `convert` would have written for the edited checkpoint.

use anyhow::{bail, ensure, Context, Result};
use microlens::blob::Activations;
use microlens::tensors::Catalogue;
use microlens::{DType, Model, TensorId, TensorKind};
use nalgebra::DMatrix;

use crate::import::layout::{tl_tensor, tl_to_blob};
use crate::quantize::{encode_nearest, nearest_tensors};

/// Checks that the model can be edited: `f32` weights and activations, MLPs.
pub fn check_editable(model: &Model<'_>) -> Result<()> {
    let cfg = model.config();
    ensure!(
        cfg.d_mlp.is_some(),
        "the model has no MLPs: memory editing rewrites an MLP's W_out"
    );
    ensure!(
        model.activations() == Activations::F32,
        "the blob runs {} activations: edit the f32 blob, then convert or quantise the result",
        model.activations().name()
    );
    let id = TensorId::layer(TensorKind::WOut, 0);
    let m = model.matrix(id).context("the model has no W_out")?;
    if m.dtype() != DType::F32 {
        bail!(
            "the blob stores {:?} weights: edit the f32 blob (microlens convert --dtype f32), then \
             quantise the edited one",
            m.dtype()
        );
    }
    Ok(())
}

/// `blocks.{layer}.mlp.W_out` as `[d_mlp, d_model]` (TransformerLens's layout).
pub fn w_out(model: &Model<'_>, layer: usize) -> Result<DMatrix<f64>> {
    let t = tl_tensor(model, TensorId::layer(TensorKind::WOut, layer))
        .with_context(|| format!("the model has no layer {layer} W_out"))?;
    let (rows, cols) = (t.shape[0], t.shape[1]);
    Ok(DMatrix::from_row_iterator(
        rows,
        cols,
        t.data.iter().map(|&x| x as f64),
    ))
}

/// `delta` with each row's mean removed if the blob's writing weights are centred.
pub fn in_blob_form(model: &Model<'_>, mut delta: DMatrix<f64>) -> DMatrix<f64> {
    if model.processing().center_writing_weights {
        for mut row in delta.row_iter_mut() {
            let mean = row.mean();
            row.add_scalar_mut(-mean);
        }
    }
    delta
}

/// The blob of `model` with `W_out += delta` in each `(layer, delta)` (`[d_mlp, d_model]`), every
/// other tensor as it is (all `f32`).
pub fn with_w_out_deltas(model: &Model<'_>, deltas: &[(usize, DMatrix<f64>)]) -> Result<Vec<u8>> {
    check_editable(model)?;
    let cfg = model.config();
    let mut tensors = nearest_tensors(model, DType::F32)?;
    for (id, tensor) in Catalogue::new(cfg).ids().zip(tensors.iter_mut()) {
        if id.kind != TensorKind::WOut {
            continue;
        }
        let Some((layer, delta)) = deltas.iter().find(|(l, _)| *l == id.layer) else {
            continue;
        };
        let mut w = w_out(model, *layer)?;
        ensure!(
            w.shape() == delta.shape(),
            "the W_out update has shape {:?}, not {:?}",
            delta.shape(),
            w.shape()
        );
        w += delta;
        let tl: Vec<f32> = w.transpose().iter().map(|&x| x as f32).collect(); // row-major
        *tensor = encode_nearest(
            id,
            id.shape(cfg),
            &tl_to_blob(TensorKind::WOut, cfg, &tl),
            DType::F32,
        )?;
    }
    let blob = microlens::blob::write(cfg, *model.processing(), Activations::F32, &tensors)
        .context("cannot write the edited blob")?;
    let blob = crate::text::hf::with_record(blob, model.tokenizer())?;
    Model::from_bytes(&blob).context("the edited blob does not read back")?;
    Ok(blob)
}
