//! Capability features: which a blob needs, and a build without one rejects the blob with a typed error.

mod common;

use common::random_blob_as;
use microlens::{Activations, Config, DType, Model, Normalization};

/// An attention-only model without norms, like the shipped one.
fn attn_only() -> Config {
    let mut cfg = Config::new(2, 16, 2, 8, 23, 12, None);
    cfg.normalization = Normalization::None;
    cfg
}

#[test]
#[cfg(feature = "full")]
fn needed_features_follow_the_blob() {
    use common::small_config;
    use microlens::Positional;
    let needed = |cfg: &Config, dtype, act| {
        let blob = random_blob_as(cfg, 1, dtype, act);
        Model::from_bytes(&blob).map(|m| m.features().names().to_vec())
    };
    assert_eq!(
        needed(&attn_only(), DType::I8, Activations::I8),
        Ok(vec!["activations-i8", "weights-i8"])
    );
    assert_eq!(
        needed(&small_config(), DType::F16, Activations::F32),
        Ok(vec!["activations-f32", "weights-f16", "norm", "mlp"])
    );
    let mut rotary = attn_only();
    rotary.positional = Positional::Rotary {
        dim: 4,
        base: 10000.0,
        adjacent_pairs: false,
    };
    assert_eq!(
        needed(&rotary, DType::F32, Activations::F32),
        Ok(vec!["activations-f32", "weights-f32", "rotary"])
    );
}

/// Run with `cargo test -p microlens --no-default-features --features std,weights-f32,activations-f32
/// --test features`: the f16 and int8 blobs are refused, the f32 one is read.
#[test]
#[cfg(not(any(feature = "weights-f16", feature = "activations-i8")))]
fn a_blob_needing_a_compiled_out_feature_is_an_error() {
    use microlens::Error;
    let blob = |dtype, act| random_blob_as(&attn_only(), 2, dtype, act);
    let f16 = blob(DType::F16, Activations::F32);
    assert_eq!(
        Model::from_bytes(&f16).err(),
        Some(Error::Unsupported {
            feature: "weights-f16"
        })
    );
    let i8 = blob(DType::I8, Activations::I8);
    assert_eq!(
        Model::from_bytes(&i8).err(),
        Some(Error::Unsupported {
            feature: "activations-i8"
        })
    );
    assert!(Model::from_bytes(&blob(DType::F32, Activations::F32)).is_ok());
}
