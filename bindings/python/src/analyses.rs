//! `microlens.fidelity`: `microlens fidelity --json` of two models on random induction sequences.

use anyhow::{ensure, Result};
use microlens_host::eval::emulation::Int8Emulation;
use microlens_host::eval::run::{check_sequences, check_tokens, DEFAULT_MAX_SEQ_LEN};
use microlens_host::eval::sequences::induction_sequences;
use microlens_host::fidelity::{compare_with, describe, mark_emulated};
use pyo3::prelude::*;

use crate::errors::OrPy;
use crate::model::Model;

/// `fidelity --json` of `candidate` against `reference` (labelled as given) on `sequences` random
/// induction sequences of `seq_len` tokens (default: n_ctx, at most 256) drawn with `seed`, as a JSON
/// string.
#[pyfunction]
#[pyo3(signature = (reference, candidate, sequences=200, seq_len=None, seed=0, labels=None))]
pub fn fidelity(
    py: Python<'_>,
    reference: &Model,
    candidate: &Model,
    sequences: usize,
    seq_len: Option<usize>,
    seed: u64,
    labels: Option<(String, String)>,
) -> PyResult<String> {
    py.detach(|| -> Result<String> {
        let (r, c) = (reference.blob()?, candidate.blob()?);
        let cfg = r.config();
        let len = seq_len.unwrap_or(cfg.n_ctx.min(DEFAULT_MAX_SEQ_LEN));
        ensure!(
            (1..=cfg.n_ctx).contains(&len),
            "seq_len must be in 1..={} (n_ctx)",
            cfg.n_ctx
        );
        check_sequences("sequences", sequences, len)?;
        let seqs = induction_sequences(sequences, len, cfg.d_vocab, seed);
        for s in &seqs {
            check_tokens(&r, s)?;
        }
        let mut emulation = Int8Emulation::new(&c, &[]);
        let report = compare_with(&r, &c, &mut emulation, &seqs, || {})?;
        let (rl, cl) = labels.unwrap_or_else(|| ("reference".into(), "candidate".into()));
        let mut v = serde_json::to_value(&report)?;
        v["reference"] = describe(&rl, &r);
        v["candidate"] = describe(&cl, &c);
        mark_emulated(&mut v["candidate"], &[], &[]);
        Ok(v.to_string())
    })
    .or_py()
}
