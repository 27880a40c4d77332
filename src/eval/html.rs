//! The HTML pages of an evaluation report and of a comparison: the figures, and a table per
//! group (self-contained, no scripts besides the render check).

use super::compare::Comparison;
use super::report::{EvalReport, GroupStats};

/// The script that marks, once the page has loaded, how many figures the browser rendered
/// (`data-figures-rendered="k/n"` on `<body>`; a figure counts when its image decoded).
const RENDER_CHECK: &str = "<script>window.addEventListener('load',function(){var f=document.querySelectorAll('img.figure'),k=0;f.forEach(function(i){if(i.complete&&i.naturalWidth>0)k++;});document.body.setAttribute('data-figures-rendered',k+'/'+f.length);});</script>\n";

fn figure_tags(figures: &[&str]) -> String {
    figures
        .iter()
        .map(|f| {
            let (w, h) = if f.ends_with("search_scaling.svg") || f.ends_with("universe_size.svg") {
                (1280, 440)
            } else {
                (640, 400)
            };
            format!(
                "<img class=\"figure\" src=\"{0}\" alt=\"{0}\" width=\"{w}\" height=\"{h}\">\n",
                escape(f)
            )
        })
        .collect()
}

/// A self-contained page for a comparison: the figures and a table per group.
pub fn comparison_html(c: &Comparison, figures: &[&str]) -> String {
    let mut page = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>rulegym eval comparison</title>\n\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;margin-bottom:1em}}\
         td,th{{border:1px solid #999;padding:2px 8px;text-align:right}}img{{margin:4px}}</style>\
         {RENDER_CHECK}</head><body>\n<h1>rulegym eval comparison</h1>\n\
         <p>Means over runs (seeds) ± standard error over runs, and ± standard error over all \
         questions pooled; schema version {}.</p>\n",
        c.schema_version
    );
    page.push_str(&figure_tags(figures));
    for (title, groups) in [("groups", &c.groups), ("universe sizes", &c.by_universe)] {
        page.push_str(&format!(
            "<h2>{}</h2>\n<table>\n<tr><th>group</th><th>runs</th><th>people</th><th>n</th>\
             <th>F1</th><th>± SE seeds</th><th>± SE questions</th><th>searches</th>\
             <th>± SE seeds</th><th>oracle searches</th></tr>\n",
            escape(title)
        ));
        for g in groups.iter() {
            let o = &g.overall;
            page.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td>\
                 <td>{:.3}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>\n",
                escape(&g.group),
                o.runs,
                g.universe_people,
                o.n,
                o.f1,
                o.f1_se_seeds,
                o.f1_se_questions,
                o.searches,
                o.searches_se_seeds,
                o.oracle_searches
            ));
        }
        page.push_str("</table>\n");
    }
    if !c.gaps.is_empty() {
        page.push_str(
            "<h2>gaps to the baseline</h2>\n<table>\n<tr><th>group</th><th>baseline</th>\
             <th>difficulty</th><th>F1 gap</th><th>± SE</th></tr>\n",
        );
        for g in &c.gaps {
            for s in std::iter::once(&g.overall).chain(&g.by_difficulty) {
                page.push_str(&format!(
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:+.3}</td><td>{:.3}</td></tr>\n",
                    escape(&g.group),
                    escape(&g.baseline),
                    escape(&s.key),
                    s.f1_gap,
                    s.f1_gap_se
                ));
            }
        }
        page.push_str("</table>\n");
    }
    page.push_str("</body></html>\n");
    page
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn table(title: &str, groups: &[GroupStats]) -> String {
    let mut t = format!(
        "<h2>{}</h2>\n<table>\n<tr><th>{}</th><th>n</th><th>F1</th><th>± SE</th><th>EM</th>\
         <th>token F1</th><th>precision</th><th>recall</th><th>searches</th><th>± SE</th>\
         <th>oracle searches</th><th>turns</th><th>answered</th><th>gold retrieved</th>\
         <th>errors</th></tr>\n",
        escape(title),
        escape(title)
    );
    for g in groups {
        t.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td>\
             <td>{:.3}</td><td>{:.3}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td>\
             <td>{:.3}</td><td>{:.3}</td><td>{}</td></tr>\n",
            escape(&g.key),
            g.n,
            g.f1,
            g.f1_se,
            g.em,
            g.token_f1.map_or("-".to_owned(), |t| format!("{t:.3}")),
            g.precision,
            g.recall,
            g.searches,
            g.searches_se,
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
         {RENDER_CHECK}</head><body>\n<h1>rulegym eval: {model}</h1>\n<p>endpoint {endpoint}, turn cap {turns}, \
         temperature {temperature}, top-p {top_p}, {max_tokens} tokens per turn, context budget {context}, \
         tokens counted by {counter}; ± SE is the standard error over questions; report schema \
         version {version}</p>\n",
        model = escape(&report.model),
        endpoint = escape(&report.endpoint),
        turns = report.max_turns,
        temperature = report.run.temperature,
        top_p = report
            .run
            .top_p
            .map_or("default".to_owned(), |p| p.to_string()),
        max_tokens = report.run.max_tokens,
        context = report
            .run
            .max_context_tokens
            .map_or("none".to_owned(), |c| c.to_string()),
        counter = escape(&report.run.token_counter),
        version = report.schema_version,
    );
    page.push_str(&table("overall", std::slice::from_ref(&report.overall)));
    page.push_str(&figure_tags(figures));
    page.push_str(&table("hops", &report.by_hops));
    page.push_str(&table("difficulty", &report.by_difficulty));
    page.push_str(&table("family", &report.by_family));
    page.push_str("</body></html>\n");
    page
}
