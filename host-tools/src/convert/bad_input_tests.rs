//! Every bad input is refused with one line naming the tensor or option, and leaves no file behind.

use std::path::{Path, PathBuf};

use microlens::{Normalization, Positional};
use serde_json::Value;

use crate::convert::{convert_to_file, ConvertOptions};
use crate::import::random_model::{config, state_dict, tl_json, write_checkpoint};
use crate::import::state_dict::{StateDict, Tensor};

/// A random checkpoint after `mutate`, in a fresh directory.
fn checkpoint(mutate: impl FnOnce(&mut StateDict, &mut Value)) -> (tempfile::TempDir, PathBuf) {
    let cfg = config(Normalization::LN, Positional::Standard, true);
    let (mut sd, mut json) = (state_dict(&cfg, 1), tl_json(&cfg));
    mutate(&mut sd, &mut json);
    let dir = tempfile::tempdir().unwrap();
    let path = write_checkpoint(&sd, &json, dir.path());
    (dir, path)
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Converting fails with a one-line error containing `needle`, and the directory is left as it was.
fn assert_refused(dir: &Path, ckpt: &Path, opts: &ConvertOptions, needle: &str) {
    let before = files_in(dir);
    let out = dir.join("out.mlb");
    let err = format!("{:#}", convert_to_file(ckpt, &out, opts).unwrap_err());
    assert!(
        err.contains(needle),
        "error {err:?} does not name {needle:?}"
    );
    assert!(!err.contains('\n'), "error is not one line: {err:?}");
    assert!(!out.exists());
    assert_eq!(files_in(dir), before, "a failed convert left files behind");
}

fn refused(mutate: impl FnOnce(&mut StateDict, &mut Value), needle: &str) {
    let (dir, ckpt) = checkpoint(mutate);
    assert_refused(dir.path(), &ckpt, &ConvertOptions::default(), needle);
}

#[test]
fn nan_and_inf_name_the_tensor() {
    refused(
        |sd, _| sd.get_mut("blocks.0.attn.W_V").unwrap().data[5] = f32::NAN,
        "blocks.0.attn.W_V",
    );
    refused(
        |sd, _| sd.get_mut("embed.W_E").unwrap().data[0] = f32::INFINITY,
        "embed.W_E",
    );
    refused(
        |sd, _| sd.get_mut("ln_final.b").unwrap().data[0] = f32::NEG_INFINITY,
        "ln_final.b",
    );
}

#[test]
fn missing_unexpected_and_misshapen_tensors_are_named() {
    refused(
        |sd, _| drop(sd.remove("blocks.1.attn.b_O")),
        "blocks.1.attn.b_O",
    );
    refused(
        |sd, _| sd.insert("blocks.0.mlp.W_gate", Tensor::zeros(vec![12, 20])),
        "blocks.0.mlp.W_gate",
    );
    refused(
        |sd, _| sd.get_mut("blocks.0.attn.W_K").unwrap().shape = vec![3, 6, 12],
        "blocks.0.attn.W_K",
    );
    // A config that does not match the checkpoint: LNPre has no ln weights.
    refused(
        |_, json| json["normalization_type"] = "LNPre".into(),
        "blocks.0.ln1.b",
    );
}

#[test]
fn unsupported_config_options_are_named() {
    // Options the checkpoint does not match: the tensor they need is named.
    refused(
        |_, json| json["gated_mlp"] = true.into(),
        "blocks.0.mlp.W_gate",
    );
    refused(
        |_, json| json["n_key_value_heads"] = 1.into(),
        "blocks.0.attn.W_K",
    );
    refused(
        |_, json| json["n_key_value_heads"] = 2.into(),
        "n_key_value_heads",
    );
    refused(|_, json| json["act_fn"] = "swiglu".into(), "act_fn");
    refused(
        |_, json| json["output_logits_soft_cap"] = 30.0.into(),
        "output_logits_soft_cap",
    );
    refused(
        |_, json| drop(json.as_object_mut().unwrap().remove("d_model")),
        "d_model",
    );
}

#[test]
fn other_failures_write_nothing() {
    let (dir, ckpt) = checkpoint(|_, _| {});
    let opts = ConvertOptions {
        config: Some(dir.path().join("nope.json")),
        ..ConvertOptions::default()
    };
    assert_refused(dir.path(), &ckpt, &opts, "nope.json");
    assert_refused(
        dir.path(),
        &dir.path().join("absent.safetensors"),
        &ConvertOptions::default(),
        "absent.safetensors",
    );
    std::fs::write(dir.path().join("junk.safetensors"), b"not a checkpoint").unwrap();
    assert_refused(
        dir.path(),
        &dir.path().join("junk.safetensors"),
        &ConvertOptions::default(),
        "junk.safetensors",
    );
    let err = convert_to_file(
        &ckpt,
        &dir.path().join("no/such/dir/out.mlb"),
        &ConvertOptions::default(),
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("no/such/dir"));
    // And the good checkpoint converts.
    convert_to_file(
        &ckpt,
        &dir.path().join("out.mlb"),
        &ConvertOptions::default(),
    )
    .unwrap();
    assert!(dir.path().join("out.mlb").exists());
}
