//! Writing a report or a comparison to its folder: the data file, the SVG figures and the page
//! that shows them, each written atomically. The data types never import their writers.

use super::compare::Comparison;
use super::episode::EpisodeRecord;
use super::report::EvalReport;
use serde::Serialize;
use std::path::Path;

/// Writes `value` as pretty JSON to `dir/name`, the figures beside it, then the page that
/// `page` renders from the figures' names, to `dir/page_name`.
fn write_pages<T: Serialize>(
    dir: &Path,
    (name, value): (&str, &T),
    figures: Vec<(String, String)>,
    (page_name, page): (&str, impl FnOnce(&[&str]) -> String),
) -> crate::Result<()> {
    let mut json = serde_json::to_vec_pretty(value).map_err(|source| crate::Error::Json {
        context: format!("serialising {name}"),
        source,
    })?;
    json.push(b'\n');
    crate::io::write_file_atomic(&dir.join(name), &json)?;
    for (figure, svg) in &figures {
        crate::io::write_file_atomic(&dir.join(figure), svg.as_bytes())?;
    }
    let names: Vec<&str> = figures.iter().map(|(n, _)| n.as_str()).collect();
    crate::io::write_file_atomic(&dir.join(page_name), page(&names).as_bytes())
}

/// Writes `trajectories.jsonl`, `report.json`, the SVG figures and `report.html` into `dir`.
pub fn write_outputs(
    dir: &Path,
    records: &[EpisodeRecord],
    report: &EvalReport,
) -> crate::Result<()> {
    crate::io::write_jsonl(&dir.join("trajectories.jsonl"), records)?;
    write_pages(
        dir,
        ("report.json", report),
        super::plot::figures(report)?,
        ("report.html", |names: &[&str]| {
            super::html::html(report, names)
        }),
    )
}

/// Writes `comparison.json`, `search_scaling.svg`, `universe_size.svg` and `comparison.html`
/// into `dir`.
pub fn write_comparison(dir: &Path, comparison: &Comparison) -> crate::Result<()> {
    write_pages(
        dir,
        ("comparison.json", comparison),
        super::plot::comparison_figures(comparison)?,
        ("comparison.html", |names: &[&str]| {
            super::html::comparison_html(comparison, names)
        }),
    )
}
