//! PNG heatmaps with plotters: one matrix per panel, several panels per image.

use std::path::Path;

use anyhow::{anyhow, Result};

use crate::io::output::Outputs;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// How values map to colours.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    /// Signed values: blue (negative), white (0), red (positive), symmetric around 0, saturating at the
    /// panel's largest magnitude.
    Signed,
    /// Like [`Scale::Signed`], saturating at a fixed magnitude (e.g. 1 for normalised patching results).
    SignedUpTo(f64),
    /// Values in `[0, max]`: white to dark blue.
    Unit(f64),
}

/// The colour of `v` on `scale` as `(r, g, b)`, `max_abs` saturating [`Scale::Signed`]; grey for a
/// value that is not finite. The PNG and the HTML pages share it.
pub fn scale_rgb(scale: Scale, v: f64, max_abs: f64) -> (u8, u8, u8) {
    let lerp =
        |a: u8, b: u8, t: f64| (a as f64 + (b as f64 - a as f64) * t.clamp(0.0, 1.0)).round() as u8;
    let blend =
        |to: (u8, u8, u8), t: f64| (lerp(255, to.0, t), lerp(255, to.1, t), lerp(255, to.2, t));
    if !v.is_finite() {
        return (200, 200, 200);
    }
    match scale {
        Scale::Signed | Scale::SignedUpTo(_) => {
            let max = match scale {
                Scale::SignedUpTo(m) if m > 0.0 => m,
                _ => max_abs,
            };
            if v >= 0.0 {
                blend((178, 24, 43), v / max)
            } else {
                blend((33, 102, 172), -v / max)
            }
        }
        Scale::Unit(max) => blend((8, 48, 107), v / if max > 0.0 { max } else { 1.0 }),
    }
}

/// One heatmap panel: `values[row][col]`, row 0 at the top.
#[derive(Clone, Debug)]
pub struct Heatmap {
    /// Caption.
    pub title: String,
    /// The matrix.
    pub values: Vec<Vec<f64>>,
    /// Label of each row.
    pub rows: Vec<String>,
    /// Label of each column.
    pub cols: Vec<String>,
    /// Axis description of the rows.
    pub row_axis: String,
    /// Axis description of the columns.
    pub col_axis: String,
    /// Colour scale.
    pub scale: Scale,
}

impl Heatmap {
    /// A panel with numbered rows and columns.
    pub fn new(title: impl Into<String>, values: Vec<Vec<f64>>, scale: Scale) -> Self {
        let n_rows = values.len();
        let n_cols = values.first().map_or(0, Vec::len);
        Heatmap {
            title: title.into(),
            values,
            rows: (0..n_rows).map(|i| i.to_string()).collect(),
            cols: (0..n_cols).map(|i| i.to_string()).collect(),
            row_axis: String::new(),
            col_axis: String::new(),
            scale,
        }
    }

    /// Sets the axis descriptions.
    pub fn axes(mut self, rows: impl Into<String>, cols: impl Into<String>) -> Self {
        self.row_axis = rows.into();
        self.col_axis = cols.into();
        self
    }

    /// Sets the row and column labels.
    pub fn labels(mut self, rows: Vec<String>, cols: Vec<String>) -> Self {
        self.rows = rows;
        self.cols = cols;
        self
    }

    /// The colour of `v` ([`scale_rgb`] with this panel's scale).
    pub fn rgb(&self, v: f64, max_abs: f64) -> (u8, u8, u8) {
        scale_rgb(self.scale, v, max_abs)
    }

    fn colour(&self, v: f64, max_abs: f64) -> RGBColor {
        let (r, g, b) = self.rgb(v, max_abs);
        RGBColor(r, g, b)
    }

    /// The largest finite `|value|`, 1 if there is none.
    pub fn max_abs(&self) -> f64 {
        let max_abs = self
            .values
            .iter()
            .flatten()
            .filter(|v| v.is_finite())
            .fold(0.0f64, |m, v| m.max(v.abs()));
        if max_abs > 0.0 {
            max_abs
        } else {
            1.0
        }
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, plotters::coord::Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("plot {:?}: {e:?}", self.title);
        let (n_rows, n_cols) = (self.values.len(), self.values.first().map_or(0, Vec::len));
        let max_abs = self.max_abs();
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, ("sans-serif", 18))
            .margin(6)
            .x_label_area_size(36)
            .y_label_area_size(56)
            // plotters' integer ranges are inclusive: `0..n - 1` has n segments.
            .build_cartesian_2d(
                (0..n_cols.max(1) - 1).into_segmented(),
                (0..n_rows.max(1) - 1).into_segmented(),
            )
            .map_err(err)?;
        let (x_label, y_label) = (
            axis_labels(&self.cols, None),
            axis_labels(&self.rows, Some(n_rows)),
        );
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(n_cols.min(32))
            .y_labels(n_rows.min(32))
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .x_desc(self.col_axis.as_str())
            .y_desc(self.row_axis.as_str())
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(err)?;
        let cells = self
            .values
            .iter()
            .enumerate()
            .flat_map(|(r, row)| row.iter().enumerate().map(move |(c, &v)| (r, c, v)));
        chart
            .draw_series(cells.clone().map(|(r, c, v)| {
                let y = n_rows - 1 - r;
                Rectangle::new(
                    [
                        (SegmentValue::Exact(c), SegmentValue::Exact(y)),
                        (SegmentValue::Exact(c + 1), SegmentValue::Exact(y + 1)),
                    ],
                    self.colour(v, max_abs).filled(),
                )
            }))
            .map_err(err)?;
        if n_rows * n_cols <= 100 {
            chart
                .draw_series(cells.map(|(r, c, v)| {
                    let style = TextStyle::from(("sans-serif", 11).into_font())
                        .pos(Pos::new(HPos::Center, VPos::Center));
                    Text::new(
                        format!("{v:.2}"),
                        (
                            SegmentValue::CenterOf(c),
                            SegmentValue::CenterOf(n_rows - 1 - r),
                        ),
                        style,
                    )
                }))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// The tick label of a segment: `names[i]`, counted from the end of `flip` segments when given (rows
/// are drawn bottom-up).
fn axis_labels(names: &[String], flip: Option<usize>) -> impl Fn(&SegmentValue<usize>) -> String {
    let names = names.to_vec();
    move |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => match flip {
            Some(n) => n
                .checked_sub(i + 1)
                .and_then(|i| names.get(i))
                .cloned()
                .unwrap_or_default(),
            None => names.get(*i).cloned().unwrap_or_default(),
        },
        _ => String::new(),
    }
}

/// Refuses, before any work, a `--plot` directory where one of the files `names` may not be written
/// ([`Outputs::check`]: an input, a FIFO, a directory).
pub fn check_dir(outputs: &Outputs, dir: &Path, names: &[&str]) -> Result<()> {
    names.iter().try_for_each(|n| outputs.check(&dir.join(n)))
}

/// Writes `panels` to a PNG at `path` through `outputs` (atomically, never onto an input), `per_row`
/// panels side by side, each `panel_px` pixels square.
pub fn save(
    outputs: &Outputs,
    path: &Path,
    panels: &[Heatmap],
    per_row: usize,
    panel_px: u32,
) -> Result<()> {
    let per_row = per_row.clamp(1, panels.len().max(1));
    let n_rows = panels.len().div_ceil(per_row).max(1);
    let size = (panel_px * per_row as u32, panel_px * n_rows as u32);
    let pending = outputs.create(path)?;
    {
        let root = BitMapBackend::new(pending.path(), size).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| anyhow!("{}: {e:?}", path.display()))?;
        for (panel, area) in panels.iter().zip(root.split_evenly((n_rows, per_row))) {
            panel.draw(&area)?;
        }
        root.present()
            .map_err(|e| anyhow!("cannot write {}: {e:?}", path.display()))?;
    }
    pending.commit()
}
