//! The page of `microlens report`: the model card, the fidelity summary, the tokens coloured by
//! per-position KL and top-1 agreement, every head's attention pattern (reference, candidate and their
//! difference side by side), and the sortable head and composition tables.

use anyhow::Result;
use microlens::analysis::{Head, HeadPattern};
use serde_json::{json, Map, Value};

use super::svg::compact;
use super::{hex, rounded};
use crate::analysis::head_figures::HeadFigures;
use crate::analysis::Baseline;
use crate::eval::metrics::{argmax, kl, log_softmax};
use crate::fidelity::Report;
use crate::report::plot::{scale_rgb, Heatmap, Scale};

/// One model as the page shows it.
pub struct ModelView<'a> {
    /// Its file, as given.
    pub path: String,
    /// `inspect`'s summary ([`crate::report::inspect::summary`]).
    pub summary: Value,
    /// Its figures.
    pub figures: &'a HeadFigures,
}

/// Everything the page shows.
pub struct ReportPage<'a> {
    /// The reference model.
    pub reference: ModelView<'a>,
    /// The candidate, if any.
    pub candidate: Option<ModelView<'a>>,
    /// The shown sequence.
    pub tokens: &'a [u32],
    /// Each shown token's text (its id, or its decoded text).
    pub labels: Vec<String>,
    /// The shown sequence as text, when the model has one (byte-level models).
    pub prompt: Option<String>,
    /// Sequences the scores average over.
    pub sequences: usize,
    /// The token the last-position attribution is to.
    pub dla_token: u32,
    /// `fidelity`'s report over the sequences (with a candidate).
    pub fidelity: Option<&'a Report>,
    /// The composition scores' random baseline.
    pub baseline: Baseline,
}

/// `L.H`.
fn head_id(h: Head) -> String {
    format!("{}.{}", h.layer, h.head)
}

/// Every head of the page's model, layer by layer.
fn all_heads(p: &ReportPage<'_>) -> Vec<Head> {
    let n = p.reference.figures.scores.n_heads;
    let layers = p.reference.figures.run.patterns.len();
    (0..layers)
        .flat_map(|l| (0..n).map(move |h| Head::new(l, h)))
        .collect()
}

/// A `[query][key]` pattern as a heatmap.
fn pattern(title: &str, values: &[Vec<f32>], scale: Scale) -> Heatmap {
    let rows = values
        .iter()
        .map(|r| r.iter().map(|&x| x as f64).collect())
        .collect();
    Heatmap::new(title, rows, scale)
}

/// `candidate - reference`, entry by entry.
fn difference(reference: &[Vec<f32>], candidate: &[Vec<f32>]) -> Vec<Vec<f32>> {
    reference
        .iter()
        .zip(candidate)
        .map(|(r, c)| r.iter().zip(c).map(|(a, b)| b - a).collect())
        .collect()
}

/// Row `q` of a causal pattern up to the diagonal, rounded, for the page's script.
fn rows_json(values: &[Vec<f32>]) -> Value {
    values
        .iter()
        .enumerate()
        .map(|(q, r)| {
            r.iter()
                .take(q + 1)
                .map(|&x| rounded(x as f64, 3))
                .collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .into()
}

/// Per-position `KL(reference || candidate)` and whether both rank the same token first.
fn position_terms(reference: &HeadFigures, candidate: &HeadFigures) -> Vec<(f64, usize, usize)> {
    reference
        .run
        .logits
        .iter()
        .zip(&candidate.run.logits)
        .map(|(r, c)| (kl(&log_softmax(r), &log_softmax(c)), argmax(r), argmax(c)))
        .collect()
}

/// The token strip: each token's label, tooltip and (with a candidate) its KL colour and top-1 flag.
fn tokens_json(p: &ReportPage<'_>) -> Vec<Value> {
    let terms = p
        .candidate
        .as_ref()
        .map(|c| position_terms(p.reference.figures, c.figures));
    let max_kl = terms.iter().flatten().map(|t| t.0).fold(0.0f64, f64::max);
    p.labels
        .iter()
        .zip(p.tokens)
        .enumerate()
        .map(|(pos, (label, id))| {
            let mut title = format!("position {pos}, token {id}");
            let (mut bg, mut flip) = (None, false);
            if let Some((kl, r, c)) = terms.as_ref().and_then(|t| t.get(pos)) {
                title +=
                    &format!("; next token: KL {kl:.3e} nats, top-1 reference {r}, candidate {c}");
                // Up to 60% of the red: dark text stays readable.
                bg = Some(hex(scale_rgb(Scale::SignedUpTo(max_kl / 0.6), *kl, 0.0)));
                flip = r != c;
            }
            json!({"label": label, "title": title, "bg": bg, "flip": flip})
        })
        .collect()
}

/// The model card rows of one model.
fn card(role: &str, m: &ModelView<'_>) -> Value {
    let s = &m.summary;
    let dtypes: Vec<String> = s["bytes_per_dtype"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k} {v} B"))
        .collect();
    let ram = &s["ram_bytes"];
    json!({"role": role, "rows": [
        ["file", m.path],
        ["tensors", dtypes.join(", ")],
        ["activations", s["activations"].as_str().unwrap_or("?")],
        ["flash (blob)", format!("{} B", s["flash_bytes"])],
        ["RAM at full context", format!("{} B (workspace {} + KV cache {})", ram["total"], ram["workspace"], ram["kv_cache"])],
    ]})
}

/// `key: value` rows of a JSON object's scalar members.
fn scalar_rows(v: &Value) -> Vec<(String, String)> {
    v.as_object()
        .into_iter()
        .flatten()
        .filter(|(_, x)| !x.is_object() && !x.is_array())
        .map(|(k, x)| {
            (
                k.clone(),
                x.as_str().map_or_else(|| x.to_string(), String::from),
            )
        })
        .collect()
}

/// The fidelity section's figures.
fn fidelity_json(report: &Report, heads: &[Head], n_heads: usize) -> Result<Value> {
    let m = &report.model;
    let json_report = serde_json::to_value(report)?;
    let mut rows = scalar_rows(&json_report);
    if let Some(h) = &report.most_changed_head {
        rows.push((
            "most_changed_head".into(),
            format!("{}.{} (mean JS {:.3e})", h.layer, h.head, h.pattern_mean_js),
        ));
    }
    let mut moved: Vec<&Head> = heads.iter().collect();
    let js = |h: &Head| report.heads[h.index(n_heads)].pattern_mean_js;
    moved.sort_by(|a, b| js(b).total_cmp(&js(a)));
    let moved: Vec<Value> = moved
        .into_iter()
        .take(3)
        .map(|&h| json!({"id": head_id(h), "anchor": format!("{}-{}", h.layer, h.head), "js": format!("{:.2e}", js(&h))}))
        .collect();
    Ok(json!({
        "mean_kl": m.mean_kl, "top1_agreement": m.top1_agreement, "sequences": report.sequences,
        "lead": format!(
            "Mean next-token KL {:.3e} nats (max {:.3e}), top-1 agreement {:.2}% over {} positions ({:.2}% on the repeated part); largest attention change of any head {:.3}.",
            m.mean_kl, m.max_kl, 100.0 * m.top1_agreement, m.positions,
            100.0 * m.top1_agreement_repeated, report.pattern_max_abs_diff
        ),
        "moved": moved,
        "rows": rows,
    }))
}

/// Changes this small or smaller are tinted in proportion to it, not to the column's largest (a column
/// of changes of 1e-6 stays white).
const TINT_FLOOR: f64 = 0.02;

/// `x` in three decimals, or two significant digits in scientific notation when that would show 0.000;
/// with a sign when `signed`.
fn short(x: f64, signed: bool) -> String {
    match (x != 0.0 && x.abs() < 5e-4, signed) {
        (true, true) => format!("{x:+.1e}"),
        (true, false) => format!("{x:.1e}"),
        (false, true) => format!("{x:+.3}"),
        (false, false) => format!("{x:.3}"),
    }
}

/// A sortable table: `groups` (name, columns) over `columns`, `rows` of cells.
struct Table {
    groups: Vec<(String, usize)>,
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
}

impl Table {
    /// A table whose first column names the row.
    fn new(first: &str, names: Vec<Value>) -> Self {
        Table {
            groups: vec![(String::new(), 1)],
            columns: vec![first.into()],
            rows: names.into_iter().map(|n| vec![n]).collect(),
        }
    }

    /// Adds a figure per row: one column, or with candidate values three (reference, candidate, change,
    /// the change tinted by its size in the column).
    fn figure(&mut self, name: &str, reference: &[Option<f64>], candidate: Option<&[Option<f64>]>) {
        let cell = |v: Option<f64>, bg: Option<String>| match v {
            Some(x) => json!({"v": rounded(x, 9), "text": short(x, false), "bg": bg}),
            None => json!({"v": null, "text": "-"}),
        };
        let Some(candidate) = candidate else {
            self.groups.push((name.into(), 1));
            self.columns.push("value".into());
            for (row, v) in self.rows.iter_mut().zip(reference) {
                row.push(cell(*v, None));
            }
            return;
        };
        self.groups.push((name.into(), 3));
        self.columns
            .extend(["ref", "cand", "change"].map(String::from));
        let change: Vec<Option<f64>> = reference
            .iter()
            .zip(candidate)
            .map(|(r, c)| Some(c.as_ref()? - r.as_ref()?))
            .collect();
        // Tinted up to 60% of the colour at the column's largest change, at least TINT_FLOOR.
        let max = change
            .iter()
            .flatten()
            .fold(TINT_FLOOR, |m, d| m.max(d.abs()));
        for (i, row) in self.rows.iter_mut().enumerate() {
            let d = change[i];
            let bg = d.map(|d| hex(scale_rgb(Scale::SignedUpTo(max / 0.6), d, 0.0)));
            row.push(cell(reference[i], None));
            row.push(cell(candidate[i], None));
            row.push(match d {
                Some(x) => json!({"v": rounded(x, 9), "text": short(x, true), "bg": bg}),
                None => json!({"v": null, "text": "-"}),
            });
        }
    }

    fn json(self, id: &str, caption: &str) -> Value {
        json!({
            "id": id, "caption": caption,
            "groups": self.groups.iter().map(|(n, s)| json!({"name": n, "span": s})).collect::<Vec<_>>(),
            "columns": self.columns, "rows": self.rows,
        })
    }
}

/// `values` as optional numbers.
fn some(values: impl IntoIterator<Item = f64>) -> Vec<Option<f64>> {
    values.into_iter().map(Some).collect()
}

/// The per-head table.
fn head_table(p: &ReportPage<'_>, heads: &[Head]) -> Value {
    let names = heads
        .iter()
        .map(|&h| json!({"v": null, "text": head_id(h), "href": format!("#head-{}-{}", h.layer, h.head)}))
        .collect();
    let mut t = Table::new("head", names);
    let (r, c) = (p.reference.figures, p.candidate.as_ref().map(|c| c.figures));
    for (name, pattern) in [
        ("previous-token", HeadPattern::PreviousToken),
        ("duplicate-token", HeadPattern::DuplicateToken),
        ("induction", HeadPattern::Induction),
    ] {
        let cand = c.map(|c| some(c.scores.of(pattern).iter().copied()));
        t.figure(
            name,
            &some(r.scores.of(pattern).iter().copied()),
            cand.as_deref(),
        );
    }
    let cand = c.map(|c| some(c.ov_copying.iter().copied()));
    t.figure(
        "OV copying (eigenvalues)",
        &some(r.ov_copying.iter().copied()),
        cand.as_deref(),
    );
    if r.full_ov_copying.iter().any(Option::is_some) {
        let cand = c.map(|c| c.full_ov_copying.clone());
        t.figure("full-OV copying", &r.full_ov_copying, cand.as_deref());
    }
    let dla = format!("DLA to token {} (last position)", p.dla_token);
    let cand = c.map(|c| some(c.dla_last.iter().map(|&x| x as f64)));
    t.figure(
        &dla,
        &some(r.dla_last.iter().map(|&x| x as f64)),
        cand.as_deref(),
    );
    if let Some(f) = p.fidelity {
        t.figure(
            "attention JS (mean)",
            &some(f.heads.iter().map(|h| h.pattern_mean_js)),
            None,
        );
        t.figure(
            "max |A change|",
            &some(f.heads.iter().map(|h| h.pattern_max_abs_diff)),
            None,
        );
    }
    let caption = format!(
        "Heads: detector scores over {} sequence(s), weight-based copying scores, direct logit attribution at the shown sequence's last position{}",
        p.sequences,
        if p.candidate.is_some() { "; change = candidate - reference" } else { "" }
    );
    t.json("head-table", &caption)
}

/// The composition table: every pair of heads in different layers.
fn composition_table(p: &ReportPage<'_>, heads: &[Head]) -> Value {
    let pairs: Vec<(Head, Head)> = heads
        .iter()
        .flat_map(|&a| {
            heads
                .iter()
                .filter(move |b| a.layer < b.layer)
                .map(move |&b| (a, b))
        })
        .collect();
    let names = pairs
        .iter()
        .map(|(a, b)| json!({"v": null, "text": format!("{} -> {}", head_id(*a), head_id(*b))}))
        .collect();
    let mut t = Table::new("writer -> reader", names);
    let (r, c) = (p.reference.figures, p.candidate.as_ref().map(|c| c.figures));
    for (k, mode) in r.composition.iter().enumerate() {
        let of =
            |s: &crate::analysis::CompositionScores| some(pairs.iter().map(|&(a, b)| s.get(a, b)));
        let cand = c.map(|c| of(&c.composition[k]));
        t.figure(
            &format!("{}-composition", mode.mode.name()),
            &of(mode),
            cand.as_deref(),
        );
    }
    t.json(
        "composition-table",
        "Q, K and V composition scores between layers",
    )
}

/// One head's figure: its panels (reference, and candidate and difference) and caption.
fn head_panel(p: &ReportPage<'_>, h: Head, diff_scale: f64) -> Value {
    let r = &p.reference.figures.run.patterns[h.layer][h.head];
    let scores = &p.reference.figures.scores;
    let mut panels = vec![
        json!({"title": "reference", "svg": compact(&pattern(&format!("head {} reference", head_id(h)), r, Scale::Unit(1.0)))}),
    ];
    let caption = match &p.candidate {
        Some(c) => {
            let cp = &c.figures.run.patterns[h.layer][h.head];
            let d = difference(r, cp);
            let max = d.iter().flatten().fold(0.0f32, |m, x| m.max(x.abs()));
            panels.push(json!({"title": "candidate", "svg": compact(&pattern(&format!("head {} candidate", head_id(h)), cp, Scale::Unit(1.0)))}));
            panels.push(json!({"title": format!("difference (±{diff_scale:.3})"), "svg": compact(&pattern(&format!("head {} difference", head_id(h)), &d, Scale::SignedUpTo(diff_scale)))}));
            let ind = HeadPattern::Induction;
            format!(
                "max |A change| here {max:.3}; induction {:.3} -> {:.3}",
                scores.get(ind, h),
                c.figures.scores.get(ind, h)
            )
        }
        None => format!(
            "previous-token {:.3}, induction {:.3}, duplicate-token {:.3}",
            scores.get(HeadPattern::PreviousToken, h),
            scores.get(HeadPattern::Induction, h),
            scores.get(HeadPattern::DuplicateToken, h)
        ),
    };
    json!({"id": head_id(h), "anchor": format!("{}-{}", h.layer, h.head), "caption": caption, "panels": panels})
}

/// The page's context for `report.html`.
fn context(p: &ReportPage<'_>) -> Result<Value> {
    let heads = all_heads(p);
    let n_heads = p.reference.figures.scores.n_heads;
    let (rp, cp) = (
        &p.reference.figures.run.patterns,
        p.candidate.as_ref().map(|c| &c.figures.run.patterns),
    );
    let diff_scale = heads
        .iter()
        .filter_map(|h| {
            let c = cp?;
            let d = difference(&rp[h.layer][h.head], &c[h.layer][h.head]);
            Some(d.iter().flatten().fold(0.0f32, |m, x| m.max(x.abs())) as f64)
        })
        .fold(0.0f64, f64::max)
        .max(1e-6);
    let n_layers = rp.len();
    let layers: Vec<Value> = (0..n_layers)
        .map(|l| {
            let panels: Vec<Value> = heads
                .iter()
                .filter(|h| h.layer == l)
                .map(|&h| head_panel(p, h, diff_scale))
                .collect();
            json!({"layer": l, "heads": panels})
        })
        .collect();
    let mut data_heads = Map::new();
    for &h in &heads {
        let mut v = json!({"ref": rows_json(&rp[h.layer][h.head])});
        if let Some(c) = cp {
            v["cand"] = rows_json(&c[h.layer][h.head]);
        }
        data_heads.insert(head_id(h), v);
    }
    let mut models = vec![card("reference", &p.reference)];
    models.extend(p.candidate.iter().map(|c| card("candidate", c)));
    let config: Vec<(String, String)> = scalar_rows(&p.reference.summary["config"])
        .into_iter()
        .filter(|(_, v)| v != "null")
        .collect();
    let fidelity = match p.fidelity {
        Some(f) => Some(fidelity_json(f, &heads, n_heads)?),
        None => None,
    };
    let b = &p.baseline;
    Ok(json!({
        "subtitle": match &p.candidate {
            Some(c) => format!("{} (reference) vs {} (candidate)", p.reference.path, c.path),
            None => p.reference.path.clone(),
        },
        "models": models,
        "config": config,
        "fidelity": fidelity,
        "prompt": p.prompt,
        "tokens": tokens_json(p),
        "token_hint": if p.candidate.is_some() {
            "Hover, focus or tap a token to see what every head attends to from it. Background: the next-token KL(reference || candidate) at that position (white 0, red the sequence's largest); a red border: the two models' top-1 next tokens differ."
        } else {
            "Hover, focus or tap a token to see what every head attends to from it."
        },
        "pattern_hint": format!(
            "Rows are queries, columns keys (causal: lower triangle), white 0, dark blue 1{}. Colours are rounded to 1/{} of the scale; the values shown on hover are exact to 0.001.",
            if p.candidate.is_some() { "; difference = candidate - reference, red up, blue down, on one scale for every head" } else { "" },
            super::svg::LEVELS
        ),
        "table_hint": "Click a column's header to sort by it (again to reverse).",
        "composition_hint": format!(
            "Random matrices of these shapes score {:.3} ± {:.3} ({} samples).",
            b.mean, b.std, b.samples
        ),
        "layers": layers,
        "head_table": head_table(p, &heads),
        "composition_table": composition_table(p, &heads),
        "data": {"labels": p.labels, "heads": data_heads},
    }))
}

/// The report page as HTML.
pub fn render(p: &ReportPage<'_>) -> Result<String> {
    let title = match &p.candidate {
        Some(_) => "microlens report: reference and candidate, head by head",
        None => "microlens report: head by head",
    };
    super::render("report.html", "report", title, context(p)?)
}
