//! Structured configs (every option; small dimensions and ones at and past the limits) through every size
//! computation, then, when valid and small, a model with arbitrary weights and dtypes written with the
//! core's blob writer: it must read back with the same config and run.
#![no_main]

use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use microlens::Model;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(cfg) = microlens_fuzz::config(&mut u) else {
        return;
    };
    microlens_fuzz::sizes(&cfg);
    if cfg.validate().is_err() || microlens_fuzz::n_values(&cfg, 4096).is_none() {
        return;
    }
    let Ok(Some(bytes)) = microlens_fuzz::model_bytes(&mut u, &cfg) else {
        return;
    };
    let model = Model::from_bytes(&bytes).expect("a written blob reads back");
    assert_eq!(model.config(), &cfg, "the config round-trips");
    microlens_fuzz::exercise(&model, u.take_rest());
});
