//! Figures and the HTML page of an evaluation report: SVG only (plotters' SVG backend).

use super::eval::{EvalError, EvalReport, GroupStats};
use plotters::prelude::*;

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
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(lo as f64 - 0.5..hi as f64 + 0.5, 0f64..y_max)
            .map_err(|e| err(e.to_string()))?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_labels(2 * (hi - lo + 2) as usize)
            .x_label_formatter(&|x: &f64| {
                if (x - x.round()).abs() < 1e-9 {
                    format!("{}", x.round())
                } else {
                    String::new()
                }
            })
            .draw()
            .map_err(|e| err(e.to_string()))?;
        for &(label, value, colour) in series {
            let data: Vec<(f64, f64)> = points.iter().map(|(k, g)| (*k as f64, value(g))).collect();
            chart
                .draw_series(LineSeries::new(data.clone(), colour.stroke_width(2)))
                .map_err(|e| err(e.to_string()))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(data.iter().map(|&p| Circle::new(p, 4, colour.filled())))
                .map_err(|e| err(e.to_string()))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| err(e.to_string()))?;
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
    ])
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn table(title: &str, groups: &[GroupStats]) -> String {
    let mut t = format!(
        "<h2>{}</h2>\n<table>\n<tr><th>{}</th><th>n</th><th>F1</th><th>EM</th><th>precision</th>\
         <th>recall</th><th>searches</th><th>oracle searches</th><th>turns</th><th>answered</th>\
         <th>gold retrieved</th><th>errors</th></tr>\n",
        escape(title),
        escape(title)
    );
    for g in groups {
        t.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td>\
             <td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td></tr>\n",
            escape(&g.key),
            g.n,
            g.f1,
            g.em,
            g.precision,
            g.recall,
            g.searches,
            g.oracle_searches,
            g.turns,
            g.answered,
            g.gold_retrieved,
            g.errors
        ));
    }
    t.push_str("</table>\n");
    t
}

/// A self-contained page showing the figures (linked by file name) and the tables.
pub fn html(report: &EvalReport, figures: &[&str]) -> String {
    let mut page = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>rulegym eval: {model}</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;margin-bottom:1em}}\
         td,th{{border:1px solid #999;padding:2px 8px;text-align:right}}img{{margin:4px}}</style>\
         </head><body>\n<h1>rulegym eval: {model}</h1>\n<p>endpoint {endpoint}, turn cap {turns}</p>\n",
        model = escape(&report.model),
        endpoint = escape(&report.endpoint),
        turns = report.max_turns
    );
    page.push_str(&table("overall", std::slice::from_ref(&report.overall)));
    for f in figures {
        page.push_str(&format!(
            "<img src=\"{0}\" alt=\"{0}\" width=\"640\" height=\"400\">\n",
            escape(f)
        ));
    }
    page.push_str(&table("hops", &report.by_hops));
    page.push_str(&table("difficulty", &report.by_difficulty));
    page.push_str(&table("family", &report.by_family));
    page.push_str("</body></html>\n");
    page
}
