//! `microlens report` and the `--html` pages: one self-contained page (no external reference, a
//! policy forbidding fetches), every head's panel with `data-head`, the fidelity figures of `fidelity
//! --json`, token text escaped, outputs never over an input. The browser test (`cargo xtask browser`)
//! drives the same pages in Chromium.

use crate::binary::{convert_to, microlens, ok, s};
use std::path::{Path, PathBuf};

/// A shipped checkpoint converted to `dtype` in `dir`.
fn convert(dir: &Path, name: &str, dtype: &str) -> PathBuf {
    let ckpt = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../firmware-example/model")
        .join(format!("{name}.safetensors"));
    convert_to(dir, &ckpt, name, dtype, &[])
}

/// What every page must be: one document, a CSP forbidding fetches, nothing external.
fn self_contained(html: &str) {
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains(r#"content="default-src 'none'; script-src 'nonce-"#));
    for external in [
        "<img",
        "<iframe",
        "<link",
        "<object",
        "<embed",
        "<source",
        "<script src",
        "url(",
        "@import",
        "http://",
        "https://",
    ] {
        assert!(!html.contains(external), "the page holds {external:?}");
    }
}

#[test]
fn report_of_the_shipped_model_f32_vs_i8() {
    let dir = tempfile::tempdir().unwrap();
    let (f32, i8) = (
        convert(dir.path(), "induction-2l", "f32"),
        convert(dir.path(), "induction-2l", "i8"),
    );
    let out = dir.path().join("report.html");
    ok(&microlens(&[
        "report",
        s(&f32),
        s(&i8),
        "--sequences",
        "3",
        "-o",
        s(&out),
    ]));
    let html = std::fs::read_to_string(&out).unwrap();
    self_contained(&html);
    // 64 tokens (the model's n_ctx), 2 layers x 4 heads, three heatmaps each.
    assert!(html.len() < 2 << 20, "{} bytes", html.len());
    for l in 0..2 {
        for h in 0..4 {
            assert_eq!(html.matches(&format!("data-head=\"{l}.{h}\"")).count(), 1);
        }
    }
    assert_eq!(html.matches("data-head=").count(), 8);
    assert_eq!(html.matches("<svg class=\"hm\"").count(), 24);
    assert_eq!(html.matches("<span class=\"tok").count(), 64);
    // The summary carries fidelity --json's mean KL on the same sequences.
    let fidelity: serde_json::Value = serde_json::from_str(&ok(&microlens(&[
        "fidelity",
        s(&f32),
        s(&i8),
        "--sequences",
        "3",
        "--json",
    ])))
    .unwrap();
    let want = fidelity["mean_kl"].as_f64().unwrap();
    let needle = "id=\"fidelity\" data-mean-kl=\"";
    let at = html.find(needle).expect("the fidelity summary") + needle.len();
    let got: f64 = html[at..].split('"').next().unwrap().parse().unwrap();
    assert!(
        (got - want).abs() <= 1e-12 * want.max(1e-30),
        "{got} vs {want}"
    );
    assert!(want > 0.0, "int8 moves the logits");
    // The head and composition tables, sortable.
    assert!(html.contains("<table class=\"sortable\" id=\"head-table\">"));
    assert!(html.contains("<table class=\"sortable\" id=\"composition-table\">"));
    assert!(html.contains("OV copying (eigenvalues)") && html.contains("DLA to token"));
}

#[test]
fn a_report_of_one_model_has_no_candidate_columns() {
    let dir = tempfile::tempdir().unwrap();
    let f32 = convert(dir.path(), "induction-2l", "f32");
    let out = dir.path().join("one.html");
    ok(&microlens(&[
        "report",
        s(&f32),
        "--tokens",
        "1,2,3,1,2",
        "-o",
        s(&out),
    ]));
    let html = std::fs::read_to_string(&out).unwrap();
    self_contained(&html);
    assert_eq!(html.matches("data-head=").count(), 8);
    assert_eq!(html.matches("<svg class=\"hm\"").count(), 8);
    assert!(!html.contains("id=\"fidelity\""));
    assert!(!html.contains(">cand<"));
}

#[test]
fn hostile_token_text_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = convert(dir.path(), "induction-bytes", "f32");
    let hostile = r#""'><script>pwned=1</script><img src=x onerror="pwned=2">"#;
    let ids: Vec<String> = hostile.bytes().map(|b| b.to_string()).collect();
    let out = dir.path().join("hostile.html");
    ok(&microlens(&[
        "report",
        s(&bytes),
        "--tokens",
        &ids.join(","),
        "-o",
        s(&out),
    ]));
    let html = std::fs::read_to_string(&out).unwrap();
    self_contained(&html);
    assert!(!html.contains("<script>pwned") && !html.contains("<img"));
    // The prompt as text, and the one script and one data block of the page.
    assert!(html.contains(
        "&quot;&#x27;&gt;&lt;script&gt;pwned=1&lt;&#x2f;script&gt;&lt;img src=x onerror=&quot;pwned=2&quot;&gt;"
    ));
    assert_eq!(html.matches("<script").count(), 2);
    assert_eq!(html.matches("</script>").count(), 2);

    // The same prompt as `--text`: the same page, byte for byte but for the script's per-page nonce.
    let by_text = dir.path().join("hostile-text.html");
    ok(&microlens(&[
        "report",
        s(&bytes),
        "--text",
        hostile,
        "-o",
        s(&by_text),
    ]));
    let without_nonce = |page: &str| {
        let mut out = String::new();
        for (i, part) in page.split("nonce").enumerate() {
            let rest = match i {
                0 => part,
                _ => part
                    .trim_start_matches(['-', '=', '"'])
                    .trim_start_matches(|c: char| c.is_ascii_hexdigit()),
            };
            out.push_str(rest);
        }
        out
    };
    let text_page = std::fs::read_to_string(&by_text).unwrap();
    assert!(html.contains("nonce"));
    assert!(
        without_nonce(&text_page) == without_nonce(&html),
        "report --text differs from report --tokens of the same bytes"
    );
}

#[test]
fn report_refuses_to_write_over_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let f32 = convert(dir.path(), "induction-2l", "f32");
    let before = std::fs::read(&f32).unwrap();
    let o = microlens(&["report", s(&f32), "--tokens", "1,2", "-o", s(&f32)]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("is an input"));
    assert_eq!(std::fs::read(&f32).unwrap(), before);
    let o = microlens(&["report", s(&f32), "-o", s(&dir.path().join("x.html"))]);
    assert!(!o.status.success(), "a token source is required");
}

#[test]
fn patch_writes_its_heatmaps_as_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let f32 = convert(dir.path(), "induction-2l", "f32");
    let out = dir.path().join("patch.html");
    ok(&microlens(&[
        "patch",
        s(&f32),
        "--clean",
        "5,9,13,17,21,5,9,13,17",
        "--corrupt",
        "5,9,13,17,21,5,9,13,40",
        "--answer",
        "21",
        "--wrong",
        "41",
        "--html",
        s(&out),
    ]));
    let html = std::fs::read_to_string(&out).unwrap();
    self_contained(&html);
    // resid_pre, head outputs, and one by-position table per layer.
    assert_eq!(html.matches("<figure class=\"heatmap\"").count(), 4);
    assert!(html.contains("<title>layer 0, position:token 0:5: "));
}
