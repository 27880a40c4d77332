//! Figures of an evaluation report and of a comparison: SVG only (plotters' SVG backend).

use super::EvalError;
use super::compare::{Comparison, ComparisonGroup};
use super::report::{EvalReport, GroupStats};
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Line colours of overlaid runs, in order (then repeated).
const PALETTE: [RGBColor; 7] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
];

/// One overlaid line with an error band: legend label and (x, mean, half-width) points.
pub struct Band {
    /// Legend label.
    pub label: String,
    /// (x, mean, band half-width), ascending in x.
    pub points: Vec<(f64, f64, f64)>,
}

/// A chart on `area` over x in `lo - 0.5..hi + 0.5` (ticks labelled at integers only) and y in
/// `0..y_max`, with its caption (text, font size) and axis descriptions (x, y) drawn.
fn integer_x_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    (caption, size): (&str, u32),
    (lo, hi): (f64, f64),
    y_max: f64,
    (x_desc, y_desc): (&str, &str),
) -> Result<Chart<'a, 'b>, String> {
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", size))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(lo - 0.5..hi + 0.5, 0f64..y_max)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_labels(2 * (hi - lo + 2.0) as usize)
        .x_label_formatter(&|x: &f64| {
            if (x - x.round()).abs() < 1e-9 {
                format!("{}", x.round())
            } else {
                String::new()
            }
        })
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(chart)
}

/// A chart with f64 axes on an SVG drawing area.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The legend entry of a line in `colour`: a short stroke as wide as the line.
fn swatch(colour: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
}

/// Draws the legend of `chart`'s labelled series in its upper right corner.
fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>) -> Result<(), String> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())
}

/// One panel of band lines on `area`.
fn band_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    bands: &[Band],
) -> Result<(), String> {
    let xs = bands.iter().flat_map(|b| b.points.iter().map(|p| p.0));
    let lo = xs.clone().fold(f64::INFINITY, f64::min);
    let hi = xs.fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() {
        (lo, hi.max(lo + 1.0))
    } else {
        (0.0, 1.0)
    };
    let y_max = bands
        .iter()
        .flat_map(|b| b.points.iter().map(|p| p.1 + p.2))
        .fold(1.0f64, f64::max)
        * 1.1;
    let mut chart = integer_x_chart(area, (caption, 18), (lo, hi), y_max, (x_desc, y_desc))?;
    for (i, band) in bands.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let mut outline: Vec<(f64, f64)> = band
            .points
            .iter()
            .map(|&(x, m, h)| (x, (m + h).min(y_max)))
            .collect();
        outline.extend(
            band.points
                .iter()
                .rev()
                .map(|&(x, m, h)| (x, (m - h).max(0.0))),
        );
        chart
            .draw_series(std::iter::once(Polygon::new(
                outline,
                colour.mix(0.18).filled(),
            )))
            .map_err(|e| e.to_string())?;
        let line: Vec<(f64, f64)> = band.points.iter().map(|&(x, m, _)| (x, m)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), colour.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(band.label.clone())
            .legend(swatch(colour));
        chart
            .draw_series(line.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(|e| e.to_string())?;
    }
    legend(&mut chart)
}

/// Two panels side by side (F1 and searches against difficulty), each with one banded line
/// per entry of `f1` / `searches`.
fn scaling_figure(
    figure: &str,
    title: &str,
    f1: &[Band],
    searches: &[Band],
) -> crate::Result<String> {
    let err = plot_err(figure);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1280, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let root = root
            .titled(title, ("sans-serif", 22))
            .map_err(|e| err(e.to_string()))?;
        let (left, right) = root.split_horizontally(640);
        band_panel(
            &left,
            "F1",
            "PhantomWiki difficulty",
            "mean F1 (band: ±1 SE)",
            f1,
        )
        .map_err(&err)?;
        band_panel(
            &right,
            "Searches",
            "PhantomWiki difficulty",
            "searches per question (band: ±1 SE)",
            searches,
        )
        .map_err(&err)?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

fn keyed(groups: &[GroupStats], value: impl Fn(&GroupStats) -> (f64, f64)) -> Vec<(f64, f64, f64)> {
    groups
        .iter()
        .filter_map(|g| {
            let k = g.key.parse::<f64>().ok()?;
            let (m, h) = value(g);
            Some((k, m, h))
        })
        .collect()
}

fn group_bands(groups: &[ComparisonGroup]) -> (Vec<Band>, Vec<Band>) {
    let band = |g: &ComparisonGroup, f1: bool| Band {
        label: format!(
            "{} ({} run{})",
            g.group,
            g.runs.len(),
            if g.runs.len() == 1 { "" } else { "s" }
        ),
        points: g
            .by_difficulty
            .iter()
            .filter_map(|s| {
                let k = s.key.parse::<f64>().ok()?;
                Some(if f1 {
                    (k, s.f1, s.f1_band())
                } else {
                    (k, s.searches, s.searches_band())
                })
            })
            .collect(),
    };
    (
        groups.iter().map(|g| band(g, true)).collect(),
        groups.iter().map(|g| band(g, false)).collect(),
    )
}

/// The comparison's figures: the search-scaling plot (every group overlaid) and the
/// universe-size plot (runs grouped by people in the universe).
pub fn comparison_figures(c: &Comparison) -> crate::Result<Vec<(String, String)>> {
    let (f1, searches) = group_bands(&c.groups);
    let (uf1, usearches) = group_bands(&c.by_universe);
    Ok(vec![
        (
            "search_scaling.svg".into(),
            scaling_figure(
                "search_scaling.svg",
                "Search scaling: F1 and searches against difficulty",
                &f1,
                &searches,
            )?,
        ),
        (
            "universe_size.svg".into(),
            scaling_figure(
                "universe_size.svg",
                "Universe size: F1 and searches against difficulty",
                &uf1,
                &usearches,
            )?,
        ),
    ])
}

/// A plotted line: legend label, the value of a group, colour.
type Series<'a> = (&'a str, fn(&GroupStats) -> f64, RGBColor);

fn plot_err(figure: &str) -> impl Fn(String) -> crate::Error + '_ {
    move |message| {
        EvalError::Plot {
            figure: figure.to_owned(),
            message,
        }
        .into()
    }
}

/// A line chart over integer keys (hops, difficulty): one line per (label, value, colour).
fn lines(
    figure: &str,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    groups: &[GroupStats],
    series: &[Series<'_>],
) -> crate::Result<String> {
    let err = plot_err(figure);
    let points: Vec<(i64, &GroupStats)> = groups
        .iter()
        .filter_map(|g| g.key.parse::<i64>().ok().map(|k| (k, g)))
        .collect();
    let lo = points.iter().map(|p| p.0).min().unwrap_or(0);
    let hi = points.iter().map(|p| p.0).max().unwrap_or(1).max(lo + 1);
    let y_max = points
        .iter()
        .flat_map(|(_, g)| series.iter().map(move |s| (s.1)(g)))
        .fold(1.0f64, f64::max)
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut chart = integer_x_chart(
            &root,
            (caption, 20),
            (lo as f64, hi as f64),
            y_max,
            (x_desc, y_desc),
        )
        .map_err(&err)?;
        for &(label, value, colour) in series {
            let data: Vec<(f64, f64)> = points.iter().map(|(k, g)| (*k as f64, value(g))).collect();
            chart
                .draw_series(LineSeries::new(data.clone(), colour.stroke_width(2)))
                .map_err(|e| err(e.to_string()))?
                .label(label)
                .legend(swatch(colour));
            chart
                .draw_series(data.iter().map(|&p| Circle::new(p, 4, colour.filled())))
                .map_err(|e| err(e.to_string()))?;
        }
        legend(&mut chart).map_err(&err)?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// A bar chart of F1 per family, each bar labelled with its family and value.
fn family_bars(figure: &str, groups: &[GroupStats]) -> crate::Result<String> {
    let err = plot_err(figure);
    let n = groups.len().max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 400)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let mut chart = ChartBuilder::on(&root)
            .caption("F1 per question family", ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..n, 0f64..1.15)
            .map_err(|e| err(e.to_string()))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .x_desc("family")
            .y_desc("mean F1")
            .draw()
            .map_err(|e| err(e.to_string()))?;
        chart
            .draw_series(groups.iter().enumerate().map(|(i, g)| {
                let x = i as f64;
                Rectangle::new([(x + 0.15, 0.0), (x + 0.85, g.f1)], BLUE.mix(0.6).filled())
            }))
            .map_err(|e| err(e.to_string()))?;
        chart
            .draw_series(groups.iter().enumerate().map(|(i, g)| {
                Text::new(
                    format!("{} {:.3} (n={})", g.key, g.f1, g.n),
                    (i as f64 + 0.2, g.f1 + 0.06),
                    ("sans-serif", 14),
                )
            }))
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(svg)
}

/// The report's figures: (file name, SVG text).
pub fn figures(report: &EvalReport) -> crate::Result<Vec<(String, String)>> {
    let quality: [Series<'_>; 2] = [("F1", |g| g.f1, BLUE), ("EM", |g| g.em, RED)];
    let searches: [Series<'_>; 2] = [
        ("model", |g| g.searches, BLUE),
        ("proof (oracle)", |g| g.oracle_searches, BLACK),
    ];
    Ok(vec![
        (
            "f1_by_hops.svg".into(),
            lines(
                "f1_by_hops.svg",
                "Answer quality by hops",
                "relation hops",
                "mean",
                &report.by_hops,
                &quality,
            )?,
        ),
        (
            "f1_by_difficulty.svg".into(),
            lines(
                "f1_by_difficulty.svg",
                "Answer quality by difficulty",
                "PhantomWiki difficulty",
                "mean",
                &report.by_difficulty,
                &quality,
            )?,
        ),
        (
            "searches_by_hops.svg".into(),
            lines(
                "searches_by_hops.svg",
                "Search scaling: searches per question",
                "relation hops",
                "searches per question",
                &report.by_hops,
                &searches,
            )?,
        ),
        (
            "f1_by_family.svg".into(),
            family_bars("f1_by_family.svg", &report.by_family)?,
        ),
        (
            "search_scaling.svg".into(),
            scaling_figure(
                "search_scaling.svg",
                "Search scaling: F1 and searches against difficulty",
                &[Band {
                    label: report.run.label.clone(),
                    points: keyed(&report.by_difficulty, |g| (g.f1, g.f1_se)),
                }],
                &[
                    Band {
                        label: report.run.label.clone(),
                        points: keyed(&report.by_difficulty, |g| (g.searches, g.searches_se)),
                    },
                    Band {
                        label: "proof (oracle)".into(),
                        points: keyed(&report.by_difficulty, |g| (g.oracle_searches, 0.0)),
                    },
                ],
            )?,
        ),
    ])
}
