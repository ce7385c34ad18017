//! Heatmaps as inline SVG for the HTML pages, in the PNG heatmaps' colours ([`Heatmap::rgb`]).

use std::collections::BTreeMap;
use std::fmt::Write;

use minijinja::HtmlEscape;

use crate::report::plot::{Heatmap, Scale};

/// Colour steps per sign of a compact heatmap: each cell takes the colour of its value rounded to a
/// multiple of `full scale / LEVELS` (so values below half a step are white and not drawn).
pub const LEVELS: f64 = 24.0;

/// The value that saturates the colour scale.
fn full_scale(h: &Heatmap, max_abs: f64) -> f64 {
    match h.scale {
        Scale::Unit(m) | Scale::SignedUpTo(m) if m > 0.0 => m,
        _ => max_abs,
    }
}

/// `h` as a compact SVG of one unit per cell, sized by the page's CSS: one `<path>` per colour step
/// (runs of a row merged), white cells not drawn, and a `sel` rectangle for the page's script to
/// move onto the selected row (it starts above the matrix, out of sight). No text: an attention
/// pattern of 64 tokens stays a few kilobytes.
pub fn compact(h: &Heatmap) -> String {
    let (n_rows, n_cols) = (h.values.len(), h.values.first().map_or(0, Vec::len));
    let max_abs = h.max_abs();
    let step = full_scale(h, max_abs) / LEVELS;
    let mut paths: BTreeMap<(u8, u8, u8), String> = BTreeMap::new();
    for (r, row) in h.values.iter().enumerate() {
        let colours: Vec<(u8, u8, u8)> = row
            .iter()
            .map(|&v| h.rgb((v / step).round() * step, max_abs))
            .collect();
        let mut c = 0;
        while c < colours.len() {
            let run = colours[c..]
                .iter()
                .take_while(|&&k| k == colours[c])
                .count();
            if colours[c] != (255, 255, 255) {
                let d = paths.entry(colours[c]).or_default();
                let _ = write!(d, "M{c} {r}h{run}v1h-{run}z");
            }
            c += run;
        }
    }
    let mut svg = format!(
        r##"<svg class="hm" viewBox="0 0 {n_cols} {n_rows}" preserveAspectRatio="none" shape-rendering="crispEdges" role="img" aria-label="{}"><rect width="{n_cols}" height="{n_rows}" fill="#fff"/>"##,
        HtmlEscape(&h.title)
    );
    for ((r, g, b), d) in &paths {
        let _ = write!(svg, r##"<path fill="#{r:02x}{g:02x}{b:02x}" d="{d}"/>"##);
    }
    let _ = write!(
        svg,
        r#"<rect class="sel" x="0" y="-2" width="{n_cols}" height="1"/></svg>"#
    );
    svg
}

/// Pixels reserved left of a labelled heatmap for the row labels, and below it for the column labels.
const LABEL_PX: usize = 76;

/// `h` as an SVG with its row and column labels and axis descriptions, every cell a rectangle whose
/// tooltip gives its row, column and value, and the values written in the cells when there are at
/// most 100 of them (as the PNG does). For the small tables of `trace` and `patch`.
pub fn labelled(h: &Heatmap) -> String {
    let (n_rows, n_cols) = (h.values.len(), h.values.first().map_or(0, Vec::len));
    let cell = (640 / n_cols.max(1)).clamp(14, 40);
    let (left, top) = (LABEL_PX, 4);
    let (width, height) = (left + cell * n_cols + 8, top + cell * n_rows + LABEL_PX);
    let max_abs = h.max_abs();
    let text = n_rows * n_cols <= 100 && cell >= 30;
    let mut svg = format!(
        r#"<svg class="hm-labelled" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{}">"#,
        HtmlEscape(&h.title)
    );
    for (r, row) in h.values.iter().enumerate() {
        let row_label = h.rows.get(r).map_or("", String::as_str);
        let y = top + r * cell;
        let _ = write!(
            svg,
            r#"<text class="lab" x="{}" y="{}" text-anchor="end" dominant-baseline="middle">{}</text>"#,
            left - 4,
            y + cell / 2,
            HtmlEscape(row_label)
        );
        for (c, &v) in row.iter().enumerate() {
            let (cr, cg, cb) = h.rgb(v, max_abs);
            let x = left + c * cell;
            let col_label = h.cols.get(c).map_or("", String::as_str);
            let _ = write!(
                svg,
                r##"<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="#{cr:02x}{cg:02x}{cb:02x}"><title>{} {}, {} {}: {v:.4}</title></rect>"##,
                HtmlEscape(&h.row_axis),
                HtmlEscape(row_label),
                HtmlEscape(&h.col_axis),
                HtmlEscape(col_label)
            );
            if text {
                let ink = if (v / full_scale(h, max_abs)).abs() > 0.6 {
                    "#fff"
                } else {
                    "#222"
                };
                let _ = write!(
                    svg,
                    r#"<text class="val" x="{}" y="{}" fill="{ink}" text-anchor="middle" dominant-baseline="middle">{v:.2}</text>"#,
                    x + cell / 2,
                    y + cell / 2
                );
            }
        }
    }
    let base = top + n_rows * cell;
    for (c, label) in h.cols.iter().enumerate().take(n_cols) {
        let x = left + c * cell + cell / 2;
        let _ = write!(
            svg,
            r#"<text class="lab" transform="translate({x} {}) rotate(-50)" text-anchor="end">{}</text>"#,
            base + 8,
            HtmlEscape(label)
        );
    }
    let _ = write!(
        svg,
        r#"<text class="axis" x="{}" y="{}" text-anchor="middle">{}</text><text class="axis" transform="translate(10 {}) rotate(-90)" text-anchor="middle">{}</text></svg>"#,
        left + cell * n_cols / 2,
        height - 4,
        HtmlEscape(&h.col_axis),
        top + cell * n_rows / 2,
        HtmlEscape(&h.row_axis)
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_merges_runs_and_skips_white() {
        let h = Heatmap::new(
            "t",
            vec![vec![1.0, 1.0, 0.0], vec![0.0, 0.001, 0.5]],
            Scale::Unit(1.0),
        );
        let svg = compact(&h);
        assert!(svg.contains("M0 0h2v1h-2z"), "{svg}");
        assert!(svg.contains("M2 1h1v1h-1z"), "{svg}");
        // 0, 0.001 (below half a step) are white: two colours drawn, two paths.
        assert_eq!(svg.matches("<path").count(), 2, "{svg}");
    }

    #[test]
    fn labels_are_escaped() {
        let h = Heatmap::new("<b>", vec![vec![0.5]], Scale::Signed)
            .axes("layer", "pos")
            .labels(vec!["<script>".into()], vec!["\"'&".into()]);
        let svg = labelled(&h);
        assert!(!svg.contains("<script>") && !svg.contains("<b>"), "{svg}");
        assert!(
            svg.contains("&lt;script&gt;") && svg.contains("&quot;&#x27;&amp;"),
            "{svg}"
        );
    }
}
