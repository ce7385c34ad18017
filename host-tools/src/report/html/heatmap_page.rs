//! A page of labelled heatmaps (`trace --html`, `patch --html`): a summary, the prompt's tokens and
//! one SVG per table, on the same template, styles and colours as the report.

use anyhow::Result;
use serde_json::json;

use super::svg::labelled;
use crate::report::plot::Heatmap;

/// The page: `summary` rows (name, value), the prompt's token `labels`, the `panels`.
pub fn render(
    command: &str,
    title: &str,
    subtitle: &str,
    summary: &[(String, String)],
    labels: &[String],
    panels: &[Heatmap],
) -> Result<String> {
    let tokens: Vec<_> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| json!({"label": l, "title": format!("position {i}")}))
        .collect();
    let panels: Vec<_> = panels
        .iter()
        .map(|p| json!({"title": p.title, "svg": labelled(p)}))
        .collect();
    super::render(
        "heatmaps.html",
        command,
        title,
        json!({"subtitle": subtitle, "summary": summary, "tokens": tokens, "panels": panels}),
    )
}
