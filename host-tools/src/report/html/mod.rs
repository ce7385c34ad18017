//! Self-contained HTML pages: `microlens report` ([`report_page`]) and the heatmaps of `trace --html`
//! and `patch --html` ([`heatmap_page`]). Minijinja templates with HTML autoescaping (token text and
//! prompts show as text), inline SVG heatmaps ([`svg`]), inline CSS and one inline script that the
//! page's Content-Security-Policy allows by a nonce; the policy (`default-src 'none'`) forbids every
//! fetch, so nothing is loaded when the page is viewed.

pub mod heatmap_page;
pub mod report_page;
pub mod svg;

use anyhow::{Context, Result};
use minijinja::Environment;
use serde_json::Value;

/// The templates: a base page, shared macros, the two pages, their CSS and script.
const TEMPLATES: [(&str, &str); 6] = [
    ("base.html", include_str!("templates/base.html")),
    ("macros.html", include_str!("templates/macros.html")),
    ("report.html", include_str!("templates/report.html")),
    ("heatmaps.html", include_str!("templates/heatmaps.html")),
    ("page.css", include_str!("templates/page.css")),
    ("page.js", include_str!("templates/page.js")),
];

/// Renders the page template `name` with `context`, adding what the base template needs: the
/// `command` that wrote it, its `title`, the tool's version and a fresh script nonce.
pub fn render(name: &str, command: &str, title: &str, mut context: Value) -> Result<String> {
    let mut env = Environment::new();
    for (n, source) in TEMPLATES {
        env.add_template(n, source)
            .with_context(|| format!("template {n}"))?;
    }
    let nonce = format!("{:032x}", rand::random::<u128>());
    if let Value::Object(map) = &mut context {
        map.insert("command".into(), command.into());
        map.insert("title".into(), title.into());
        map.insert("version".into(), env!("CARGO_PKG_VERSION").into());
        map.insert("nonce".into(), nonce.into());
    }
    env.get_template(name)?
        .render(minijinja::value::Serde(&context))
        .with_context(|| format!("rendering {name}"))
}

/// A number rounded to `decimals` places for the pages' data (shorter JSON); `None` if not finite.
pub fn rounded(x: f64, decimals: i32) -> Option<f64> {
    let p = 10f64.powi(decimals);
    x.is_finite().then(|| (x * p).round() / p)
}

/// `#rrggbb`.
pub fn hex((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}
