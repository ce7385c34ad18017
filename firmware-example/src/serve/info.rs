//! `Info` and `Blob`: what the device runs, and its blob read back.

use core::fmt::Write;

use microlens::hash::Fnv1a64;
use microlens::{HookKind, Session};
use microlens_protocol::{ErrorKind, Info, Response, BLOB_CHUNK, MAX_FRAME, VERSION};

use crate::{model, BLOB};

/// The device's model, build and limits.
pub fn info(session: &Session<'_, '_>) -> Info {
    let model = session.model();
    let cfg = model.config();
    let mut features = heapless::String::new();
    for (i, name) in model.features().names().iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        // A name that does not fit is left out (the list is shorter than the string).
        let _ = write!(features, "{sep}{name}");
    }
    let mut hooks = 0u32;
    for (k, kind) in HookKind::ALL.into_iter().enumerate() {
        if microlens::hooks::COMPILED.contains(kind) {
            hooks |= 1 << k;
        }
    }
    let mut hash = Fnv1a64::new();
    hash.write(&BLOB.0);
    Info {
        protocol: VERSION,
        firmware: truncated(env!("CARGO_PKG_VERSION")),
        board: truncated(model::BOARD),
        n_layers: cfg.n_layers as u32,
        n_heads: cfg.n_heads as u32,
        d_model: cfg.d_model as u32,
        d_head: cfg.d_head as u32,
        d_vocab: cfg.d_vocab as u32,
        d_vocab_out: cfg.d_vocab_out as u32,
        n_ctx: cfg.n_ctx as u32,
        context: session.n_ctx() as u32,
        features,
        hooks,
        max_frame: MAX_FRAME as u32,
        blob_len: BLOB.0.len() as u32,
        blob_hash: hash.finish(),
    }
}

/// `text`, cut to fit `N` bytes at a character boundary.
fn truncated<const N: usize>(text: &str) -> heapless::String<N> {
    let mut out = heapless::String::new();
    for c in text.chars() {
        if out.push(c).is_err() {
            break;
        }
    }
    out
}

/// [`BLOB_CHUNK`] bytes of the blob from `offset`.
pub fn blob(offset: u32) -> Response {
    let blob = &BLOB.0;
    let start = offset as usize;
    let Some(rest) = blob.get(start..) else {
        return Response::Error(ErrorKind::BlobOutOfRange);
    };
    let bytes = &rest[..rest.len().min(BLOB_CHUNK)];
    Response::Blob {
        offset,
        total: blob.len() as u32,
        bytes: heapless::Vec::from_slice(bytes).unwrap_or_default(),
    }
}
