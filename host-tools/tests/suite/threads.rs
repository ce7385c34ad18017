//! Every multi-sequence command runs its sequences (or patched runs) on rayon's threads: what it reports
//! is the same, to the bit, on 1 thread and on 3.

use crate::common;

use microlens::{DType, Model};
use microlens_host::analysis::{ablation_table, activation_patching, head_scores};
use microlens_host::eval::sequences::repeated_random_tokens;
use microlens_host::fidelity::compare;

/// `f` on a pool of `threads` threads.
fn on<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn analysis_and_fidelity_do_not_depend_on_the_thread_count() {
    let blob = common::fidelity::shipped();
    let model = Model::from_bytes(&blob).unwrap();
    let cfg = *model.config();
    let seqs = repeated_random_tokens(cfg.d_vocab, cfg.n_ctx / 2, 12, 5);
    let int8 = common::fidelity::requantize(&model, DType::I8);
    let candidate = Model::from_bytes(&int8).unwrap();
    let run = || {
        let mut corrupt = seqs[0].clone();
        corrupt[3] = (corrupt[3] + 1) % cfg.d_vocab as u32;
        (
            head_scores(&model, &seqs).unwrap(),
            ablation_table(&model, &seqs, 1).unwrap(),
            activation_patching(&model, &seqs[0], &corrupt, seqs[0][40], seqs[0][41]).unwrap(),
            compare(&model, &candidate, &seqs, || ()).unwrap(),
        )
    };
    let (one, three) = (on(1, run), on(3, run));
    assert!(one == three, "1 thread and 3 threads differ");
    // Not a vacuous comparison: the runs measured something.
    assert!(one.0.induction.iter().any(|&s| s > 0.0));
    assert!(one
        .2
        .resid_pre
        .iter()
        .flatten()
        .any(|&d| d != one.2.corrupt));
}
