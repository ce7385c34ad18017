//! `browser-check`: opens microlens's HTML pages in headless Chromium through a running chromedriver
//! and checks what a person would see: every head's panel, the attention row following the hovered
//! token, no network request, no console error, and a hostile prompt shown as text, not run.
//! `cargo xtask test` writes the pages, starts chromedriver and runs this.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use clap::Parser;
use fantoccini::actions::{InputSource, MouseActions, PointerAction};
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{json, Value};

/// Arguments.
#[derive(Parser, Debug)]
struct Args {
    /// chromedriver's URL.
    #[arg(long, default_value = "http://127.0.0.1:9515")]
    webdriver: String,
    /// Chromium's binary.
    #[arg(long, default_value = "/usr/bin/chromium")]
    chromium: String,
    /// A report of a reference and a candidate.
    #[arg(long)]
    report: PathBuf,
    /// Its model's layers and heads per layer, `L,H`.
    #[arg(long)]
    heads: String,
    /// A report whose prompt is `--hostile-text`.
    #[arg(long)]
    hostile: PathBuf,
    /// The hostile prompt's text.
    #[arg(long, allow_hyphen_values = true)]
    hostile_text: String,
    /// Heatmap pages (`trace --html`, `patch --html`).
    #[arg(long)]
    heatmaps: Vec<PathBuf>,
    /// Write a screenshot of the report here (PNG).
    #[arg(long)]
    screenshot: Option<PathBuf>,
}

/// chromedriver's `POST /session/{id}/se/log` for the browser's console log (needs the
/// `goog:loggingPrefs` capability).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> std::result::Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

fn file_url(path: &Path) -> Result<String> {
    let abs = path
        .canonicalize()
        .with_context(|| format!("cannot find {}", path.display()))?;
    Ok(url::Url::from_file_path(&abs)
        .map_err(|()| anyhow::anyhow!("{} is not an absolute path", abs.display()))?
        .to_string())
}

/// Opens `page` and waits for it to have loaded.
async fn open(c: &Client, page: &Path) -> Result<()> {
    c.goto(&file_url(page)?).await?;
    c.wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("footer"))
        .await?;
    Ok(())
}

/// `script`'s value (the body of a function: `return ...`).
async fn eval(c: &Client, script: &str) -> Result<Value> {
    Ok(c.execute(script, vec![]).await?)
}

/// The page fetched nothing (no resource entries) and logged no warning or error; the browser log is
/// drained, so each page is judged on its own.
async fn quiet(c: &Client, what: &str) -> Result<()> {
    let resources = eval(
        c,
        "return performance.getEntriesByType('resource').map(e => e.name);",
    )
    .await?;
    ensure!(
        resources.as_array().is_some_and(Vec::is_empty),
        "{what}: the page fetched {resources}"
    );
    let log = c.issue_cmd(BrowserLog).await?;
    let bad: Vec<&Value> = log
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| matches!(e["level"].as_str(), Some("SEVERE" | "WARNING")))
        .collect();
    ensure!(bad.is_empty(), "{what}: console errors {bad:?}");
    Ok(())
}

/// Moves the mouse onto token `pos` of the strip.
async fn hover_token(c: &Client, pos: usize) -> Result<()> {
    let tok = c
        .find(Locator::Css(&format!("#tokens .tok[data-pos=\"{pos}\"]")))
        .await?;
    let mouse = MouseActions::new("mouse".into()).then(PointerAction::MoveToElement {
        element: tok,
        duration: None,
        x: 0.0,
        y: 0.0,
    });
    c.perform_actions(mouse).await?;
    Ok(())
}

/// The readout of head `id`'s panel and the row its `sel` marks.
async fn readout(c: &Client, id: &str) -> Result<(String, String)> {
    let fig = c
        .find(Locator::Css(&format!("figure.head[data-head=\"{id}\"]")))
        .await?;
    let text = fig.find(Locator::Css(".readout")).await?.text().await?;
    let sel = fig.find(Locator::Css("svg.hm .sel")).await?;
    let y = sel.attr("y").await?.unwrap_or_default();
    Ok((text, y))
}

async fn check_report(c: &Client, args: &Args) -> Result<()> {
    open(c, &args.report).await?;
    let (layers, heads) = args
        .heads
        .split_once(',')
        .and_then(|(l, h)| Some((l.parse::<usize>().ok()?, h.parse::<usize>().ok()?)))
        .context("--heads is L,H")?;
    let panels = c.find_all(Locator::Css("figure.head[data-head]")).await?;
    ensure!(
        panels.len() == layers * heads,
        "report: {} head panels, {} expected",
        panels.len(),
        layers * heads
    );
    for l in 0..layers {
        for h in 0..heads {
            let fig = c
                .find(Locator::Css(&format!("figure.head[data-head=\"{l}.{h}\"]")))
                .await
                .with_context(|| format!("report: no panel for head {l}.{h}"))?;
            let svgs = fig.find_all(Locator::Css("svg.hm")).await?.len();
            ensure!(svgs == 3, "report: head {l}.{h} has {svgs} heatmaps, 3 expected (reference, candidate, difference)");
        }
    }
    let kl = c
        .find(Locator::Id("fidelity"))
        .await?
        .attr("data-mean-kl")
        .await?
        .context("report: #fidelity has no data-mean-kl")?;
    let kl: f64 = kl.parse().context("report: data-mean-kl is not a number")?;
    ensure!(kl.is_finite() && kl >= 0.0, "report: mean KL {kl}");
    let last = format!("{}.{}", layers - 1, heads - 1);
    hover_token(c, 3).await?;
    let (a, ya) = readout(c, &last).await?;
    hover_token(c, 9).await?;
    let (b, yb) = readout(c, &last).await?;
    ensure!(
        a.starts_with("query 3 ") && b.starts_with("query 9 ") && a != b,
        "report: hovering tokens 3 and 9 showed {a:?} then {b:?}"
    );
    ensure!(
        (ya.as_str(), yb.as_str()) == ("3", "9"),
        "report: the marked row is {ya} then {yb}, expected 3 then 9"
    );
    // Sorting the head table by a column reorders its rows.
    let first_row = "return document.querySelector('#head-table tbody tr td').textContent;";
    let before = eval(c, first_row).await?;
    let header = c
        .find(Locator::Css(
            "#head-table thead tr:last-child th:nth-child(2)",
        ))
        .await?;
    header.click().await?;
    let desc = eval(c, first_row).await?;
    header.click().await?;
    let asc = eval(c, first_row).await?;
    ensure!(
        desc != asc,
        "report: sorting the head table did not reorder it ({before} / {desc} / {asc})"
    );
    quiet(c, "report").await?;
    if let Some(out) = &args.screenshot {
        hover_token(c, 40).await?;
        c.execute("window.scrollTo(0, 0);", vec![]).await?;
        let png = c.screenshot().await?;
        std::fs::write(out, png).with_context(|| format!("cannot write {}", out.display()))?;
        println!("browser-check: wrote {}", out.display());
    }
    println!(
        "browser-check: report: {} head panels, hover, sort, no fetch, no console error",
        panels.len()
    );
    Ok(())
}

async fn check_hostile(c: &Client, args: &Args) -> Result<()> {
    open(c, &args.hostile).await?;
    let shown = c.find(Locator::Id("prompt")).await?.text().await?;
    ensure!(
        shown == args.hostile_text,
        "hostile prompt: shown as {shown:?}, expected the text {:?}",
        args.hostile_text
    );
    let state = eval(
        c,
        "return [typeof window.pwned, document.scripts.length, document.images.length];",
    )
    .await?;
    ensure!(
        state == json!(["undefined", 2, 0]),
        "hostile prompt: [typeof window.pwned, scripts, images] = {state}, expected [\"undefined\", 2, 0]"
    );
    quiet(c, "hostile prompt").await?;
    println!("browser-check: hostile prompt shown as text, nothing run");
    Ok(())
}

async fn check_heatmaps(c: &Client, page: &Path) -> Result<()> {
    open(c, page).await?;
    let n = c.find_all(Locator::Css("figure.heatmap svg")).await?.len();
    ensure!(n > 0, "{}: no heatmap", page.display());
    quiet(c, &page.display().to_string()).await?;
    println!(
        "browser-check: {}: {n} heatmaps, no fetch, no console error",
        page.display()
    );
    Ok(())
}

async fn run(args: Args) -> Result<()> {
    let caps = json!({
        "goog:chromeOptions": {
            "binary": args.chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1800", "--hide-scrollbars"],
        },
        "goog:loggingPrefs": {"browser": "ALL"},
    });
    let Value::Object(caps) = caps else {
        bail!("capabilities are an object");
    };
    let c = ClientBuilder::new(HttpConnector::new())
        .capabilities(caps)
        .connect(&args.webdriver)
        .await
        .with_context(|| format!("cannot start a session at {}", args.webdriver))?;
    let result = async {
        check_report(&c, &args).await?;
        check_hostile(&c, &args).await?;
        for page in &args.heatmaps {
            check_heatmaps(&c, page).await?;
        }
        Ok(())
    }
    .await;
    c.close().await?;
    result
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let result = runtime
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(run(args)));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("browser-check: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
