//! Containers and naming schemes: TL safetensors with buffers, TL `.pth`, HF GPT-2 safetensors all read to
//! the state dict they hold.

use std::path::Path;

use microlens::{Normalization, Positional};
use safetensors::tensor::TensorView;
use safetensors::Dtype;

use crate::convert::fold::ProcessingOptions;
use crate::convert::{convert, convert_state_dict, ConvertOptions};
use crate::import::random_model::{config, state_dict, tl_json, write_checkpoint};
use crate::import::state_dict::StateDict;
use crate::import::tl_config;
use crate::import::{load, read_file, RawTensor};
use crate::quantize::encode::F32Encoder;

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Writes named `(dtype, shape, bytes)` arrays as safetensors.
fn write_raw(arrays: &[(String, Dtype, Vec<usize>, Vec<u8>)], path: &Path) {
    let views = arrays
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()));
    safetensors::tensor::serialize_to_file(views, None, path).unwrap();
}

#[test]
fn tl_buffers_are_skipped() {
    let cfg = config(
        Normalization::LN,
        Positional::Rotary {
            dim: 4,
            base: 10000.0,
            adjacent_pairs: false,
        },
        true,
    );
    let sd = state_dict(&cfg, 3);
    let mut arrays: Vec<_> = sd
        .iter()
        .map(|(n, t)| {
            (
                n.to_string(),
                Dtype::F32,
                t.shape.clone(),
                f32_bytes(&t.data),
            )
        })
        .collect();
    for l in 0..cfg.n_layers {
        let n = cfg.n_ctx;
        arrays.push((
            format!("blocks.{l}.attn.mask"),
            Dtype::BOOL,
            vec![n, n],
            vec![1; n * n],
        ));
        arrays.push((
            format!("blocks.{l}.attn.IGNORE"),
            Dtype::F32,
            vec![],
            f32_bytes(&[f32::NEG_INFINITY]),
        ));
        arrays.push((
            format!("blocks.{l}.attn.rotary_sin"),
            Dtype::F32,
            vec![n, 4],
            f32_bytes(&vec![0.5; n * 4]),
        ));
        arrays.push((
            format!("blocks.{l}.attn.rotary_cos"),
            Dtype::F32,
            vec![n, 4],
            f32_bytes(&vec![0.5; n * 4]),
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    write_raw(&arrays, &path);
    assert_eq!(load(&path, &cfg).unwrap(), sd);
    // A bool tensor that is not a buffer is refused by name.
    arrays.push((
        "blocks.0.attn.flags".into(),
        Dtype::BOOL,
        vec![2],
        vec![0, 1],
    ));
    write_raw(&arrays, &path);
    assert!(format!("{:#}", load(&path, &cfg).unwrap_err()).contains("blocks.0.attn.flags"));
}

#[test]
fn half_precision_checkpoints_read_as_f32() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    let f16: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
        .collect();
    let bf16: Vec<u8> = [0.25f32, 3.0]
        .iter()
        .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
        .collect();
    let f64s: Vec<u8> = [0.1f64, 7.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    write_raw(
        &[
            ("a".into(), Dtype::F16, vec![2], f16),
            ("b".into(), Dtype::BF16, vec![1, 2], bf16),
            ("c".into(), Dtype::F64, vec![2], f64s),
        ],
        &path,
    );
    let raw = read_file(&path).unwrap();
    let values = |n: &str| match &raw[n] {
        RawTensor::Float(t) => t.data.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (values("a"), values("b"), values("c")),
        (vec![1.5, -2.0], vec![0.25, 3.0], vec![0.1, 7.0])
    );
}

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

#[test]
fn pth_reads_like_safetensors() {
    let dir = fixtures().join("attn_only_2l");
    let cfg = tl_config::load(&dir.join("config.json")).unwrap().config;
    let from_pth = load(&dir.join("model.pth"), &cfg).unwrap();
    assert_eq!(
        from_pth,
        load(&dir.join("model.safetensors"), &cfg).unwrap()
    );
    assert!(!from_pth.is_empty());
}

/// HF GPT-2 tensors of a TL state dict with a tied unembedding (`W_U = W_E^T`, `b_U = 0`).
fn hf_arrays(
    sd: &StateDict,
    h: usize,
    m: usize,
    n_positions: usize,
) -> Vec<(String, Dtype, Vec<usize>, Vec<u8>)> {
    let t = |n: &str| sd.get(n).unwrap();
    let d = m / h;
    let mut out = Vec::new();
    let mut put = |n: String, shape: Vec<usize>, v: Vec<f32>| {
        out.push((format!("transformer.{n}"), Dtype::F32, shape, f32_bytes(&v)))
    };
    put(
        "wte.weight".into(),
        t("embed.W_E").shape.clone(),
        t("embed.W_E").data.clone(),
    );
    // A longer wpe than n_ctx: the converter cuts it.
    let mut wpe = t("pos_embed.W_pos").data.clone();
    wpe.extend(vec![9.0; (n_positions - wpe.len() / m) * m]);
    put("wpe.weight".into(), vec![n_positions, m], wpe);
    for l in 0..2 {
        let tl = |s: &str| t(&format!("blocks.{l}.{s}")).data.clone();
        for (hf, ln) in [("ln_1", "ln1"), ("ln_2", "ln2")] {
            put(
                format!("h.{l}.{hf}.weight"),
                vec![m],
                tl(&format!("{ln}.w")),
            );
            put(format!("h.{l}.{hf}.bias"), vec![m], tl(&format!("{ln}.b")));
        }
        let mut c_attn = vec![0.0; m * 3 * m];
        let mut c_attn_b = Vec::new();
        for (i, x) in ["Q", "K", "V"].iter().enumerate() {
            let w = tl(&format!("attn.W_{x}"));
            for (hd, c, j) in
                (0..h).flat_map(|hd| (0..m).flat_map(move |c| (0..d).map(move |j| (hd, c, j))))
            {
                c_attn[c * 3 * m + i * m + hd * d + j] = w[(hd * m + c) * d + j];
            }
            c_attn_b.extend(tl(&format!("attn.b_{x}")));
        }
        put(format!("h.{l}.attn.c_attn.weight"), vec![m, 3 * m], c_attn);
        put(format!("h.{l}.attn.c_attn.bias"), vec![3 * m], c_attn_b);
        put(
            format!("h.{l}.attn.c_proj.weight"),
            vec![m, m],
            tl("attn.W_O"),
        );
        put(format!("h.{l}.attn.c_proj.bias"), vec![m], tl("attn.b_O"));
        put(
            format!("h.{l}.mlp.c_fc.weight"),
            vec![m, 4 * m],
            tl("mlp.W_in"),
        );
        put(format!("h.{l}.mlp.c_fc.bias"), vec![4 * m], tl("mlp.b_in"));
        put(
            format!("h.{l}.mlp.c_proj.weight"),
            vec![4 * m, m],
            tl("mlp.W_out"),
        );
        put(format!("h.{l}.mlp.c_proj.bias"), vec![m], tl("mlp.b_out"));
    }
    put("ln_f.weight".into(), vec![m], t("ln_final.w").data.clone());
    put("ln_f.bias".into(), vec![m], t("ln_final.b").data.clone());
    // HF's causal-mask buffers, when a checkpoint has them.
    out.push((
        "transformer.h.0.attn.bias".into(),
        Dtype::BOOL,
        vec![1, 1, 9, 9],
        vec![1; 81],
    ));
    out
}

#[test]
fn hf_gpt2_maps_to_tl_names() {
    // GPT-2 shapes: n_heads * d_head = d_model, d_mlp = 4 d_model, tied unembedding.
    let mut cfg = microlens::Config::new(2, 12, 3, 4, 11, 9, Some(48));
    cfg.act_fn = microlens::ActFn::GeluNew;
    let mut sd = state_dict(&cfg, 5);
    let w_e = sd.get("embed.W_E").unwrap().data.clone();
    let (v, m) = (cfg.d_vocab, cfg.d_model);
    let w_u = (0..m)
        .flat_map(|c| (0..v).map(|t| w_e[t * m + c]).collect::<Vec<_>>())
        .collect();
    sd.get_mut("unembed.W_U").unwrap().data = w_u;
    sd.get_mut("unembed.b_U").unwrap().data.fill(0.0);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    write_raw(&hf_arrays(&sd, cfg.n_heads, m, 12), &path);
    let hf_config = serde_json::json!({
        "model_type": "gpt2", "n_embd": m, "n_head": cfg.n_heads, "n_layer": 2, "n_positions": cfg.n_ctx,
        "n_ctx": cfg.n_ctx, "vocab_size": v, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
        "n_inner": null,
    });
    std::fs::write(dir.path().join("config.json"), hf_config.to_string()).unwrap();
    assert_eq!(
        tl_config::load(&dir.path().join("config.json"))
            .unwrap()
            .config,
        cfg
    );
    assert_eq!(load(&path, &cfg).unwrap(), sd);
    let expected =
        convert_state_dict(sd, &cfg, &ProcessingOptions::default(), &F32Encoder).unwrap();
    assert_eq!(
        convert(&path, &ConvertOptions::default()).unwrap().blob,
        expected.blob
    );
}

#[test]
fn tl_safetensors_convert_like_the_state_dict() {
    let cfg = config(Normalization::RMS, Positional::Shortformer, false);
    let sd = state_dict(&cfg, 9);
    let dir = tempfile::tempdir().unwrap();
    let path = write_checkpoint(&sd, &tl_json(&cfg), dir.path());
    let opts = ConvertOptions {
        processing: ProcessingOptions::none(),
        ..ConvertOptions::default()
    };
    let expected = convert_state_dict(sd, &cfg, &ProcessingOptions::none(), &F32Encoder).unwrap();
    assert_eq!(convert(&path, &opts).unwrap(), expected);
}
