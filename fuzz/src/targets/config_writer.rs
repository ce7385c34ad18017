//! Structured configs (every option; small dimensions and ones at and past the limits) through every size
//! computation, then, when valid and small, a model with arbitrary weights and dtypes written with the
//! core's blob writer: it must read back with the same config and run.

use arbitrary::Unstructured;
use microlens::Model;

/// One input of the target.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(cfg) = crate::config(&mut u) else {
        return;
    };
    crate::sizes(&cfg);
    if cfg.validate().is_err() || crate::n_values(&cfg, 4096).is_none() {
        return;
    }
    let Ok(Some(bytes)) = crate::model_bytes(&mut u, &cfg) else {
        return;
    };
    let model = Model::from_bytes(&bytes).expect("a written blob reads back");
    assert_eq!(model.config(), &cfg, "the config round-trips");
    crate::exercise(&model, u.take_rest());
}
