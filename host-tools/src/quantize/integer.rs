//! The integer-only arithmetic's plan (`convert --arith integer`): from an int8 blob computing in
//! float, the ranges of its forward over calibration sequences ([`Ranges`]), then every fixed scale,
//! multiplier, integer bias and activation knot the core's integer forward reads
//! ([`microlens::integer::plan`]), written into the blob's header.
//!
//! Scales: the residual stream int16 at `1.25 max|resid| / 32767` (every `hook_resid_*` and the
//! embeddings); each matmul's int8 input at `max|x| / 127` of its hook (`hook_normalized`, or the
//! residual without norms; `hook_z` is at the values' scale; `W_out`'s is `hook_post`'s); queries, keys
//! and values at `max / 127` (rotary: the larger of `hook_q` and `hook_rot_q`, likewise keys;
//! shortformer: `hook_q` and `hook_k` include the positions' `pos_Q` and `pos_K`); the
//! MLP's pre-activation int16 at `1.25 max|pre| / 32767`, its output at the knots' own scale; a gated
//! MLP's `hook_pre_linear` int16 at `1.25 max / 32767`.

use anyhow::{bail, ensure, Context, Result};
use microlens::blob::DType;
use microlens::blob::{with_arithmetic, Activations};
use microlens::integer::interpolated::Interpolated;
use microlens::integer::norm::OUTPUT_FRAC_BITS;
use microlens::integer::plan::{Norm, PlanWriter, Row};
use microlens::integer::units::UNIT_MAX;
use microlens::tensors::Catalogue;
use microlens::weights::Matrix;
use microlens::{HookKind, Model, Normalization, Positional, TensorId, TensorKind};

use super::ranges::{rescale, Ranges};

/// Headroom of the int16 ranges (residual stream, pre-activations) over the calibrated maximum.
const HEADROOM: f64 = 1.25;

/// The blob `blob` (int8 matrices, float arithmetic) as a blob of the integer-only arithmetic, its
/// ranges calibrated on `seqs`.
pub fn integer_blob(blob: &[u8], seqs: &[Vec<u32>]) -> Result<Vec<u8>> {
    let model = Model::from_bytes(blob).context("the int8 blob does not read back")?;
    if let Err(why) = microlens::integer::plan::check_config(model.config()) {
        bail!("--arith integer: {why}");
    }
    let ranges = Ranges::calibrate(&model, seqs).context("calibrating the integer ranges")?;
    let plan = plan(&model, &ranges)?;
    let out = with_arithmetic(blob, Activations::Integer, Some(&plan))?;
    Model::from_bytes(&out).context("the integer blob does not read back")?;
    Ok(out)
}

/// The largest `|x|` at `kind` in `layer`, with a clear error for a point the calibration never saw.
fn max_abs(ranges: &Ranges, kind: HookKind, layer: usize) -> Result<f64> {
    let m = ranges
        .max_abs(kind, layer)
        .with_context(|| format!("calibration never reached {kind:?} of layer {layer}"))?;
    // A point that was always 0 still needs a positive scale.
    Ok(f64::from(m).max(1e-6))
}

/// The model's matrix `kind` of `layer`.
fn matrix<'a>(model: &Model<'a>, kind: TensorKind, layer: usize) -> Result<Matrix<'a>> {
    let id = TensorId::in_layer(kind, layer);
    model
        .matrix(id)
        .with_context(|| format!("the blob has no {id}"))
}

/// The bias vector `kind` of `layer` (zeros where the blob has none or `kind` is `None`).
fn bias(model: &Model<'_>, kind: Option<TensorKind>, layer: usize, n: usize) -> Vec<f32> {
    match kind.and_then(|k| model.vector(TensorId::in_layer(k, layer))) {
        Some(v) => v.iter().collect(),
        None => vec![0.0; n],
    }
}

/// `round(x)` as an `i32`, with a clear error where it does not fit.
fn to_i32(x: f64, what: &str) -> Result<i32> {
    let r = x.round();
    ensure!(
        r.is_finite() && r.abs() < f64::from(i32::MAX),
        "{what}: {x:e} does not fit the integer arithmetic's 32 bits"
    );
    Ok(r as i32)
}

/// The group scales `s_g` of row `r` of `m` (one for an int8 row).
fn group_scales(m: &Matrix<'_>, r: usize) -> Vec<f64> {
    let groups = m.dtype().groups(m.cols()).max(1);
    (0..groups)
        .map(|g| f64::from(m.scale(r * groups + g)))
        .collect()
}

/// Row `r`'s scale: an int8 row's own; an int4 row's unit `t_r = max_g s_g / UNIT_MAX`, its groups at
/// `u_g t_r` ([`row_units`]).
fn row_scale(m: &Matrix<'_>, r: usize) -> f64 {
    let scales = group_scales(m, r);
    match m.dtype() {
        DType::I4 => scales.iter().copied().fold(0.0, f64::max) / f64::from(UNIT_MAX),
        _ => scales[0],
    }
}

/// An int4 row's group multipliers `u_g = round(s_g / t_r)`, in `0..=UNIT_MAX`.
fn row_units(m: &Matrix<'_>, r: usize) -> Vec<u16> {
    let t = row_scale(m, r);
    group_scales(m, r)
        .into_iter()
        .map(|s| (s / t).round().clamp(0.0, f64::from(UNIT_MAX)) as u16)
        .collect()
}

/// The group multipliers of every int4 matrix of `model`, in blob order (nothing for int8).
fn units(w: &mut PlanWriter, model: &Model<'_>) -> Result<()> {
    let cfg = model.config();
    for id in Catalogue::new(cfg).ids().filter(|id| id.kind.is_matrix()) {
        let m = model
            .matrix(id)
            .with_context(|| format!("the blob has no {id}"))?;
        if m.dtype() != DType::I4 {
            continue;
        }
        let all: Vec<u16> = (0..m.rows()).flat_map(|r| row_units(&m, r)).collect();
        w.units(&all);
    }
    Ok(())
}

/// The rows of a matmul: `W` (`kind` of `layer`) with input scale `s_x` to an output at `s_out`, its
/// bias (`bias_kind`) at the accumulator's scale, or at `bias_scale` where given.
fn rows(
    w: &mut PlanWriter,
    model: &Model<'_>,
    (kind, bias_kind, layer): (TensorKind, Option<TensorKind>, usize),
    (s_x, s_out): (f64, f64),
    bias_scale: Option<f64>,
) -> Result<()> {
    let m = matrix(model, kind, layer)?;
    let b = bias(model, bias_kind, layer, m.rows());
    for (r, &b) in b.iter().enumerate().take(m.rows()) {
        let acc_scale = row_scale(&m, r) * s_x;
        w.row(Row {
            bias: to_i32(
                f64::from(b) / bias_scale.unwrap_or(acc_scale),
                "a bias at its accumulator's scale",
            )?,
            to_out: rescale(acc_scale, s_out)?,
        });
    }
    Ok(())
}

/// A lookup table's rows (`W_E`, `W_pos`, `pos_Q`, `pos_K`: `kind` of `layer`), each row's multiplier
/// from its int8 values to `s_out`.
fn table_rows(
    w: &mut PlanWriter,
    model: &Model<'_>,
    (kind, layer): (TensorKind, usize),
    s_out: f64,
) -> Result<()> {
    let m = matrix(model, kind, layer)?;
    for r in 0..m.rows() {
        w.multiplier(rescale(row_scale(&m, r), s_out)?);
    }
    Ok(())
}

/// The int8 scale of the queries or keys of `layer` (`plain` the hook before rotary positions,
/// `rotated` after): `max / 127` over both.
fn qk_scale(ranges: &Ranges, plain: HookKind, rotated: HookKind, layer: usize) -> Result<f64> {
    let m = max_abs(ranges, plain, layer)?;
    Ok(m.max(ranges.max_abs(rotated, layer).map_or(0.0, f64::from)) / 127.0)
}

/// The rotary table: the Q14 `(cos, sin)` of `pos / base^(k / (dim / 2))` for every position and
/// distinct angle `k` (nothing for other positions).
fn rotary_table(w: &mut PlanWriter, cfg: &microlens::Config) {
    if let Positional::Rotary { dim, base, .. } = cfg.positional {
        let half = dim / 2;
        for pos in 0..cfg.n_ctx {
            for k in 0..half {
                let freq = f64::from(base).powf(k as f64 / half as f64);
                w.angle(microlens::integer::rotary::q14(pos as f64 / freq));
            }
        }
    }
}

/// A norm's constants: `eps` at the residual's scale and the multiplier from its Q11 output (or, without
/// norms, from the residual) to an input at `max|x| / 127` of `input` (`kind`, `layer`).
fn norm(
    model: &Model<'_>,
    ranges: &Ranges,
    s_r: f64,
    input: (HookKind, usize),
) -> Result<(Norm, f64)> {
    let cfg = model.config();
    let s_x = max_abs(ranges, input.0, input.1)? / 127.0;
    let n = cfg.d_model as f64;
    let (eps_n2, from) = match cfg.normalization {
        Normalization::None => (0, s_r),
        _ => (
            (n * n * f64::from(cfg.eps) / (s_r * s_r)).round() as u64,
            (-f64::from(OUTPUT_FRAC_BITS)).exp2(),
        ),
    };
    let to_x = rescale(from, s_x)?;
    Ok((
        Norm {
            eps_n2,
            to_x,
            s_x: s_x as f32,
        },
        s_x,
    ))
}

/// The hook a norm's output is calibrated at: `hook_normalized`, or without norms the residual
/// stream it reads.
fn norm_point(
    model: &Model<'_>,
    normalized: (HookKind, usize),
    resid: (HookKind, usize),
) -> (HookKind, usize) {
    match model.config().normalization {
        Normalization::None => resid,
        _ => normalized,
    }
}

/// The plan of `model` for `ranges`.
pub fn plan(model: &Model<'_>, ranges: &Ranges) -> Result<Vec<u8>> {
    let cfg = *model.config();
    let last = cfg.n_layers.saturating_sub(1);
    let mut resid = max_abs(ranges, HookKind::Embed, 0)?;
    for l in 0..cfg.n_layers {
        for kind in [HookKind::ResidPre, HookKind::ResidMid, HookKind::ResidPost] {
            if let Some(m) = ranges.max_abs(kind, l) {
                resid = resid.max(f64::from(m));
            }
        }
    }
    let s_r = HEADROOM * resid / 32767.0;
    let mut w = PlanWriter::new(s_r as f32);
    table_rows(&mut w, model, (TensorKind::WE, 0), s_r)?;
    if matches!(cfg.positional, Positional::Standard) {
        table_rows(&mut w, model, (TensorKind::WPos, 0), s_r)?;
    }
    rotary_table(&mut w, &cfg);
    for l in 0..cfg.n_layers {
        let point = norm_point(model, (HookKind::Ln1Normalized, l), (HookKind::ResidPre, l));
        let (ln1, s_x) = norm(model, ranges, s_r, point)?;
        w.norm(ln1);
        let s_q = qk_scale(ranges, HookKind::Q, HookKind::RotQ, l)?;
        let s_k = qk_scale(ranges, HookKind::K, HookKind::RotK, l)?;
        let s_v = max_abs(ranges, HookKind::V, l)? / 127.0;
        for s in [s_q, s_k, s_v] {
            w.f32(s as f32);
        }
        for (kind, bias, s_out) in [
            (TensorKind::WQ, TensorKind::BQ, s_q),
            (TensorKind::WK, TensorKind::BK, s_k),
            (TensorKind::WV, TensorKind::BV, s_v),
        ] {
            rows(&mut w, model, (kind, Some(bias), l), (s_x, s_out), None)?;
        }
        let q11 = f64::from(1u32 << OUTPUT_FRAC_BITS);
        w.multiplier(rescale(
            s_q * s_k * q11,
            f64::from(cfg.layer_attn_scale(l)),
        )?);
        let w_o = (TensorKind::WO, Some(TensorKind::BO), l);
        rows(&mut w, model, w_o, (s_v, s_r), None)?;
        if matches!(cfg.positional, Positional::Shortformer) {
            // `pos_Q` and `pos_K` (`W_pos W_Q`, `W_pos W_K`), added to the queries and keys.
            table_rows(&mut w, model, (TensorKind::PosQ, l), s_q)?;
            table_rows(&mut w, model, (TensorKind::PosK, l), s_k)?;
        }
        if cfg.attn_only() {
            continue;
        }
        let point = norm_point(model, (HookKind::Ln2Normalized, l), (HookKind::ResidMid, l));
        let (ln2, s_x) = norm(model, ranges, s_r, point)?;
        w.norm(ln2);
        let s_pre = HEADROOM * max_abs(ranges, HookKind::MlpPre, l)? / 32767.0;
        w.f32(s_pre as f32);
        // The activation's input: `W_in x + b_in`, or a gated MLP's `W_gate x`.
        let w_pre = match cfg.gated_mlp {
            true => (TensorKind::WGate, None, l),
            false => (TensorKind::WIn, Some(TensorKind::BIn), l),
        };
        rows(&mut w, model, w_pre, (s_x, s_pre), None)?;
        let Some(table) = Interpolated::build(cfg.act_fn, s_pre as f32) else {
            bail!("the integer arithmetic has no table for {:?}", cfg.act_fn);
        };
        w.knots(&table.knots);
        let s_post = f64::from(table.output.scale);
        w.f32(s_post as f32);
        let s_lin = match cfg.gated_mlp {
            true => HEADROOM * max_abs(ranges, HookKind::MlpPreLinear, l)? / 32767.0,
            false => 1.0,
        };
        // The post-activation: `f(pre)`, or gated `f(pre) lin` at `s_post s_lin`.
        let s_hidden = if cfg.gated_mlp {
            s_post * s_lin
        } else {
            s_post
        };
        let s_x3 = max_abs(ranges, HookKind::MlpPost, l)? / 127.0;
        w.multiplier(rescale(s_hidden, s_x3)?);
        w.f32(s_x3 as f32);
        let w_out = (TensorKind::WOut, Some(TensorKind::BOut), l);
        rows(&mut w, model, w_out, (s_x3, s_r), None)?;
        if cfg.gated_mlp {
            w.f32(s_lin as f32);
            let w_in = (TensorKind::WIn, Some(TensorKind::BIn), l);
            rows(&mut w, model, w_in, (s_x, s_lin), Some(s_hidden))?;
        }
    }
    let point = norm_point(
        model,
        (HookKind::LnFinalNormalized, 0),
        (HookKind::ResidPost, last),
    );
    let (ln_final, s_x) = norm(model, ranges, s_r, point)?;
    w.norm(ln_final);
    let w_u = matrix(model, TensorKind::WU, 0)?;
    let b_u = bias(model, Some(TensorKind::BU), 0, w_u.rows());
    for (r, &b) in b_u.iter().enumerate().take(w_u.rows()) {
        let acc_scale = row_scale(&w_u, r) * s_x;
        w.logit(
            to_i32(f64::from(b) / acc_scale, "b_U at its accumulator's scale")?,
            acc_scale as f32,
        );
    }
    units(&mut w, model)?;
    Ok(w.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::random_model::{config, f32_blob};
    use crate::quantize::calibration::Source;
    use crate::quantize::{requantize, Rounding};
    use microlens::{Activations, Config, Error, Positional, Session};

    /// The logits of `model` over `tokens`, every position.
    fn logits(model: &Model<'_>, tokens: &[u32]) -> Vec<f32> {
        let mut kv = vec![0f32; model.kv_cache_len()];
        let mut ws = vec![0f32; model.workspace_len()];
        let mut s = Session::new(model, &mut kv, &mut ws).unwrap();
        tokens
            .iter()
            .flat_map(|&t| s.step(t).unwrap().to_vec())
            .collect()
    }

    /// The random LLaMA shape: RMSNorm, rotary positions over part of each head, a gated SiLU MLP and
    /// one key/value head for three query heads.
    fn llama_config() -> microlens::Config {
        let rotary = Positional::Rotary {
            dim: 4,
            base: 10000.0,
            adjacent_pairs: false,
        };
        let mut cfg = config(Normalization::RMSPre, rotary, true);
        cfg.gated_mlp = true;
        cfg.act_fn = microlens::ActFn::Silu;
        cfg.n_key_value_heads = 1;
        cfg
    }

    /// An int8 blob computing in float, of a random model with `norm` (and an MLP or not).
    fn int8_blob(norm: Normalization, mlp: bool, seed: u64) -> Vec<u8> {
        int8_blob_of(&config(norm, Positional::Standard, mlp), seed)
    }

    /// An int8 blob computing in float, of a random model of `cfg`.
    fn int8_blob_of(cfg: &microlens::Config, seed: u64) -> Vec<u8> {
        blob_of(cfg, DType::I8, seed)
    }

    /// A `dtype` blob computing in float, of a random model of `cfg`.
    fn blob_of(cfg: &microlens::Config, dtype: DType, seed: u64) -> Vec<u8> {
        let blob = f32_blob(cfg, seed);
        let model = Model::from_bytes(&blob).unwrap();
        requantize(&model, dtype, Activations::F32, &Rounding::Nearest).unwrap()
    }

    /// Why `Model::from_bytes` refuses `blob` computing in integers with the plan `plan` (an
    /// inconsistency, never another error).
    fn refusal(blob: &[u8], plan: Option<&[u8]>) -> String {
        let bytes = with_arithmetic(blob, Activations::Integer, plan).unwrap();
        match Model::from_bytes(&bytes) {
            Err(e @ Error::Inconsistent(_)) => e.to_string(),
            other => panic!("{other:?}"),
        }
    }

    /// The float blob `blob` in the integer arithmetic follows its float forward within a tenth of
    /// the logits' RMS, and gives the same bits twice.
    fn follows_the_float_forward(blob: &[u8], what: &str) {
        let float = Model::from_bytes(blob).unwrap();
        let seqs = Source::default().sequences(&float).unwrap();
        let int = integer_blob(blob, &seqs).unwrap();
        let model = Model::from_bytes(&int).unwrap();
        assert_eq!(model.activations(), Activations::Integer);
        let tokens = &seqs[0];
        let (a, b) = (logits(&float, tokens), logits(&model, tokens));
        let rms = (a.iter().map(|v| v * v).sum::<f32>() / a.len() as f32).sqrt();
        let err = a
            .iter()
            .zip(&b)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(err < 0.1 * rms, "{what}: max error {err} against rms {rms}");
        assert_eq!(b, logits(&model, tokens), "the same bits again");
    }

    #[test]
    fn int4_matrices_in_integers_follow_their_float_forward() {
        // Rows of several groups, the last one partial (d_model 40, d_mlp 72), and of one short group.
        let mut wide = Config::new(2, 40, 4, 10, 11, 9, Some(72));
        wide.normalization = Normalization::LNPre;
        wide.act_fn = microlens::ActFn::GeluNew;
        let mut llama = llama_config();
        (llama.d_model, llama.d_mlp) = (48, Some(40));
        for cfg in [
            wide,
            llama,
            config(Normalization::LNPre, Positional::Standard, false),
        ] {
            let blob = blob_of(&cfg, DType::I4, 7);
            let what = format!("int4 {:?} {:?}", cfg.normalization, cfg.positional);
            follows_the_float_forward(&blob, &what);
            // The integer blob carries each int4 row's group multipliers after the plan.
            let float = Model::from_bytes(&blob).unwrap();
            let seqs = Source::default().sequences(&float).unwrap();
            let ranges = Ranges::calibrate(&float, &seqs[..2]).unwrap();
            let plan = plan(&float, &ranges).unwrap();
            assert_eq!(
                plan.len(),
                microlens::integer::plan::len_of(&cfg, true),
                "{what}"
            );
            // Without its units (an int8 model's length) or a word short: refused.
            let int8_len = microlens::integer::plan::len_of(&cfg, false);
            for cut in [&plan[..int8_len], &plan[..plan.len() - 4]] {
                let err = refusal(&blob, Some(cut));
                assert!(err.contains("integer plan"), "{what}: {err}");
            }
        }
    }

    #[test]
    fn int4_rows_wider_than_the_sums_take_are_refused_by_name() {
        // `W_out`'s rows of 2,080 columns: 65 groups, one more than an `i32` sum holds.
        let mut cfg = Config::new(1, 12, 3, 4, 11, 9, Some(2080));
        cfg.normalization = Normalization::LNPre;
        let blob = blob_of(&cfg, DType::I4, 9);
        let mut plan = vec![0u8; microlens::integer::plan::len_of(&cfg, true)];
        plan[..4].copy_from_slice(&microlens::integer::plan::MAGIC.to_le_bytes());
        let err = refusal(&blob, Some(&plan));
        assert!(err.contains("at most 2048 columns"), "{err}");
    }

    #[test]
    fn an_int4_row_s_units_keep_its_group_scales_within_half_a_unit() {
        let mut cfg = Config::new(1, 40, 4, 10, 11, 9, Some(72));
        cfg.normalization = Normalization::LNPre;
        let blob = blob_of(&cfg, DType::I4, 8);
        let model = Model::from_bytes(&blob).unwrap();
        let w = model
            .matrix(TensorId::in_layer(TensorKind::WOut, 0))
            .unwrap();
        for r in 0..w.rows() {
            let (t, units, scales) = (row_scale(&w, r), row_units(&w, r), group_scales(&w, r));
            assert_eq!(units.len(), 3);
            assert_eq!(
                units.iter().max(),
                Some(&UNIT_MAX),
                "the largest group at UNIT_MAX"
            );
            for (u, s) in units.iter().zip(&scales) {
                assert!(
                    (f64::from(*u) * t - s).abs() <= 0.5 * t * (1.0 + 1e-9),
                    "{u} {s} {t}"
                );
            }
        }
    }

    #[test]
    fn the_integer_forward_follows_the_float_one() {
        let mut adjacent = llama_config();
        adjacent.positional = Positional::Rotary {
            dim: 6,
            base: 500.0,
            adjacent_pairs: true,
        };
        for cfg in [
            config(Normalization::LNPre, Positional::Standard, true),
            config(Normalization::RMSPre, Positional::Standard, true),
            config(Normalization::None, Positional::Standard, false),
            config(Normalization::LNPre, Positional::Standard, false),
            llama_config(),
            adjacent,
            config(Normalization::LNPre, Positional::Shortformer, false),
        ] {
            let (norm, mlp) = (cfg.normalization, cfg.d_mlp.is_some());
            let what = format!("{norm:?} mlp {mlp} {:?}", cfg.positional);
            follows_the_float_forward(&int8_blob_of(&cfg, 3), &what);
        }
    }

    #[test]
    fn a_blob_without_its_plan_or_with_a_short_one_is_refused() {
        let blob = int8_blob(Normalization::LNPre, true, 4);
        let float = Model::from_bytes(&blob).unwrap();
        let seqs = Source::default().sequences(&float).unwrap();
        let int = integer_blob(&blob, &seqs[..4]).unwrap();
        let plan = plan(&float, &Ranges::calibrate(&float, &seqs[..4]).unwrap()).unwrap();
        let refused = |plan: Option<&[u8]>| refusal(&blob, plan);
        assert!(refused(None).contains("integer plan"));
        assert!(refused(Some(&plan[..plan.len() - 4])).contains("integer plan"));
        let mut bad = plan.clone();
        bad[0] ^= 0xff;
        assert!(refused(Some(&bad)).contains("integer plan"));
        assert_eq!(
            with_arithmetic(&blob, Activations::Integer, Some(&plan)).unwrap(),
            int
        );
    }

    #[test]
    fn models_the_arithmetic_does_not_cover_are_refused_by_name() {
        let cfg = config(Normalization::LNPre, Positional::Sinusoidal, false);
        let blob = f32_blob(&cfg, 5);
        let model = Model::from_bytes(&blob).unwrap();
        let i8 = requantize(
            &model,
            microlens::DType::I8,
            Activations::F32,
            &Rounding::Nearest,
        )
        .unwrap();
        let seqs = Source::default().sequences(&model).unwrap();
        let err = integer_blob(&i8, &seqs[..2]).unwrap_err().to_string();
        assert!(err.contains("not sinusoidal"), "{err}");
    }

    #[test]
    fn the_shipped_fact_model_recalls_every_fact_in_integers() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../firmware-example/model");
        let opts = crate::convert::ConvertOptions {
            dtype: microlens::DType::I8,
            activations: Some(Activations::Integer),
            ..Default::default()
        };
        let c = crate::convert::convert(&dir.join("facts-4l.safetensors"), &opts).unwrap();
        let model = Model::from_bytes(&c.blob).unwrap();
        assert_eq!(model.activations(), Activations::Integer);
        let facts = crate::train::facts::read_facts_file(&dir.join("facts-4l.facts")).unwrap();
        assert_eq!(facts.len(), 256);
        let recalled = crate::train::facts::recall(&model, &facts).unwrap();
        assert_eq!(recalled, 1.0, "facts recalled in the integer arithmetic");
    }

    /// Wants every hook point; zeroes layer 1's patterns when `ablate`.
    struct Every {
        ablate: bool,
    }
    impl microlens::Hooks for Every {
        fn wants(&self, _: HookKind) -> bool {
            true
        }
        fn hook(&mut self, p: microlens::HookPoint, act: &mut [f32]) {
            if self.ablate && p.kind == HookKind::Pattern && p.layer == 1 {
                act.fill(0.0);
            }
        }
    }

    #[test]
    fn hooks_that_only_read_leave_the_bits_and_writes_are_used() {
        for cfg in [
            config(Normalization::LNPre, Positional::Standard, true),
            llama_config(),
        ] {
            reading_hooks_leave_the_bits(&int8_blob_of(&cfg, 6));
        }
    }

    #[test]
    fn a_one_layer_rotary_model_in_integers_slides_by_re_encoding() {
        // One layer with rotary positions would restore its cache in the float arithmetics.
        let mut cfg = llama_config();
        cfg.n_layers = 1;
        let blob = int8_blob_of(&cfg, 8);
        let float = Model::from_bytes(&blob).unwrap();
        let seqs = Source::default().sequences(&float).unwrap();
        let int = integer_blob(&blob, &seqs[..8]).unwrap();
        let model = Model::from_bytes(&int).unwrap();
        let tokens: Vec<u32> = (0..20).map(|i| (i * 7 % cfg.d_vocab) as u32).collect();
        let (mut kv, mut ws) = (
            vec![0f32; model.kv_cache_len()],
            vec![0f32; model.workspace_len()],
        );
        let mut session = Session::new(&model, &mut kv, &mut ws).unwrap();
        let width = 5;
        let mut window_tokens = vec![0u32; width];
        let mut kept = vec![0f32; microlens::Window::kept_len(&cfg, width)];
        let mut window =
            microlens::Window::new(&mut session, width, &mut window_tokens, &mut kept).unwrap();
        assert_eq!(window.mode(), microlens::WindowMode::ReEncode);
        for (t, &token) in tokens.iter().enumerate() {
            let got = window.step(token).unwrap().to_vec();
            let start = (t + 1).saturating_sub(width);
            let fresh = logits(&model, &tokens[start..=t]);
            assert_eq!(got, fresh[fresh.len() - got.len()..], "token {t}");
        }
    }

    /// Every hook point's values, by point, in the order the forward calls them.
    #[derive(Default)]
    struct Record(Vec<(microlens::HookPoint, Vec<f32>)>);
    impl microlens::Hooks for Record {
        fn wants(&self, kind: HookKind) -> bool {
            kind != HookKind::Result
        }
        fn hook(&mut self, p: microlens::HookPoint, act: &mut [f32]) {
            self.0.push((p, act.to_vec()));
        }
    }

    #[test]
    fn the_llama_shape_s_hooks_see_what_the_float_forward_sees() {
        let blob = int8_blob_of(&llama_config(), 7);
        let float = Model::from_bytes(&blob).unwrap();
        let seqs = Source::default().sequences(&float).unwrap();
        let int = integer_blob(&blob, &seqs).unwrap();
        let model = Model::from_bytes(&int).unwrap();
        let record = |model: &Model<'_>| {
            let mut r = Record::default();
            crate::eval::run::run_with_hooks(model, &seqs[1], &mut r).unwrap();
            r.0
        };
        // Each point by name, head and position (the float pass runs several positions a layer).
        let points = |r: Vec<(microlens::HookPoint, Vec<f32>)>| {
            r.into_iter()
                .filter(|(p, _)| {
                    !matches!(
                        p.kind,
                        HookKind::Ln1Scale | HookKind::Ln2Scale | HookKind::LnFinalScale
                    )
                })
                .map(|(p, v)| ((p.to_string(), p.head, p.pos), v))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let (want, got) = (points(record(&float)), points(record(&model)));
        for name in ["hook_rot_q", "hook_rot_k", "hook_pre_linear", "hook_post"] {
            assert!(got.keys().any(|k| k.0.ends_with(name)), "{name} not called");
        }
        // The integer forward calls every point the float one calls but the norms' scales.
        assert!(want.keys().eq(got.keys()));
        // Within a quarter of the point's range (its largest value over heads and positions).
        let mut range = std::collections::BTreeMap::<&str, f32>::new();
        for ((name, _, _), w) in &want {
            let r = range.entry(name).or_default();
            *r = w.iter().fold(*r, |m, v| m.max(v.abs()));
        }
        for (p, w) in &want {
            let max = range[p.0.as_str()];
            let err = w
                .iter()
                .zip(&got[p])
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(err <= 0.25 * max, "{p:?}: error {err} against range {max}");
        }
    }

    /// A pass with hooks that read every point gives the plain pass's bits; one that zeroes layer 1's
    /// patterns changes them.
    fn reading_hooks_leave_the_bits(blob: &[u8]) {
        let float = Model::from_bytes(blob).unwrap();
        let seqs = Source::default().sequences(&float).unwrap();
        let int = integer_blob(blob, &seqs[..8]).unwrap();
        let model = Model::from_bytes(&int).unwrap();
        let tokens = &seqs[0];
        let run = |mut hooks: &mut dyn microlens::Hooks| {
            let mut kv = vec![0f32; model.kv_cache_len()];
            let mut ws = vec![0f32; model.workspace_len()];
            let mut s = Session::new(&model, &mut kv, &mut ws).unwrap();
            let mut out = Vec::new();
            for &t in tokens {
                out.extend(
                    s.step_with(t, &mut hooks)
                        .unwrap()
                        .iter()
                        .map(|v| v.to_bits()),
                );
            }
            out
        };
        let plain = logits(&model, tokens)
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>();
        assert_eq!(
            run(&mut Every { ablate: false }),
            plain,
            "reading hooks change nothing"
        );
        assert_ne!(
            run(&mut Every { ablate: true }),
            plain,
            "a pattern zeroed by a hook is used"
        );
    }
}
