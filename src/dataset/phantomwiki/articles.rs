//! PhantomWiki's `articles.json`, compared sentence by sentence with rulegym's articles.

use super::*;

/// One record of PhantomWiki's `articles.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PwArticle {
    /// The person's name.
    pub title: String,
    /// The Markdown article.
    pub article: String,
    /// The facts it states (`sister("A", "B").`).
    #[serde(default)]
    pub facts: Vec<String>,
}

/// Parses `articles.json` (a JSON array; PhantomWiki's `--article-format json`).
pub fn parse_articles(json: &str, file: &str) -> Result<Vec<PwArticle>> {
    serde_json::from_str(json).map_err(|source| Error::Json {
        context: format!("parsing {file} (PhantomWiki articles, --article-format json)"),
        source,
    })
}

/// How one article differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArticleDiff {
    /// The article's title.
    pub title: String,
    /// `order` (same sentences, list items in another order), `text` or `facts`.
    pub kind: String,
    /// PhantomWiki's line (or fact).
    pub phantomwiki: String,
    /// rulegym's line (or fact).
    pub rulegym: String,
}

/// Article comparison summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ArticleReport {
    /// PhantomWiki articles read.
    pub articles: usize,
    /// Byte-identical articles.
    pub identical: usize,
    /// Articles with the same sentences where some list (friends, siblings, ...) is ordered
    /// differently.
    pub order_only: usize,
    /// Articles whose sentences differ.
    pub differ: usize,
    /// PhantomWiki titles that name nobody in the universe.
    pub missing: usize,
    /// People without a PhantomWiki article.
    pub people_without_article: usize,
    /// Articles whose stated facts differ as sets.
    pub facts_differ: usize,
    /// Up to 20 examples of each kind of difference.
    pub examples: Vec<ArticleDiff>,
}

impl ArticleReport {
    /// Same sentences for every person (list order aside) and the same facts.
    pub fn sentences_agree(&self) -> bool {
        self.differ == 0
            && self.missing == 0
            && self.people_without_article == 0
            && self.facts_differ == 0
    }
}

/// A sentence with its comma-separated list sorted ("The friends of N are B, A." -> "... A, B.").
pub(super) fn sorted_sentence(line: &str) -> String {
    let Some(body) = line.strip_suffix('.') else {
        return line.to_owned();
    };
    let Some(at) = body.find(" are ") else {
        return line.to_owned();
    };
    let (head, list) = body.split_at(at + " are ".len());
    let mut items: Vec<&str> = list.split(", ").collect();
    items.sort_unstable();
    format!("{head}{}.", items.join(", "))
}

/// A fact as (predicate, argument texts), however it was quoted; `None` if it is not one.
pub(super) fn fact_key(fact: &str) -> Option<(String, Vec<String>)> {
    match parse_fact(fact).ok()? {
        Term::Compound(name, args) => {
            let texts = args
                .iter()
                .map(|a| a.as_text().map(str::to_owned))
                .collect::<Option<Vec<_>>>()?;
            Some((name, texts))
        }
        _ => None,
    }
}

/// Renders rulegym's article for every person and compares it with PhantomWiki's.
pub fn compare_articles(universe: &Universe, articles: &[PwArticle]) -> ArticleReport {
    let by_name: BTreeMap<&str, PersonId> = universe
        .people
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i as PersonId))
        .collect();
    let mut report = ArticleReport {
        articles: articles.len(),
        ..ArticleReport::default()
    };
    let mut covered = BTreeSet::new();
    let example = |report: &mut ArticleReport, diff: ArticleDiff| {
        if report
            .examples
            .iter()
            .filter(|e| e.kind == diff.kind)
            .count()
            < 20
        {
            report.examples.push(diff);
        }
    };
    for pw in articles {
        let Some(&id) = by_name.get(pw.title.as_str()) else {
            report.missing += 1;
            continue;
        };
        covered.insert(id);
        let ours = corpus::article(universe, id);
        if ours.text == pw.article {
            report.identical += 1;
        } else {
            let (a, b): (Vec<&str>, Vec<&str>) =
                (pw.article.lines().collect(), ours.text.lines().collect());
            let first_diff = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i));
            let same_sorted = a.len() == b.len()
                && a.iter()
                    .zip(&b)
                    .all(|(x, y)| x == y || sorted_sentence(x) == sorted_sentence(y));
            let kind = if same_sorted {
                report.order_only += 1;
                "order"
            } else {
                report.differ += 1;
                "text"
            };
            if let Some(i) = first_diff {
                example(
                    &mut report,
                    ArticleDiff {
                        title: pw.title.clone(),
                        kind: kind.to_owned(),
                        phantomwiki: a.get(i).unwrap_or(&"").to_string(),
                        rulegym: b.get(i).unwrap_or(&"").to_string(),
                    },
                );
            }
        }
        let theirs: BTreeSet<_> = pw.facts.iter().map(|f| fact_key(f).ok_or(f)).collect();
        let mine: BTreeSet<_> = ours.facts.iter().map(|f| fact_key(f).ok_or(f)).collect();
        if theirs != mine {
            report.facts_differ += 1;
            let show = |x: Option<&std::result::Result<(String, Vec<String>), &String>>| {
                x.map_or(String::new(), |f| format!("{f:?}"))
            };
            example(
                &mut report,
                ArticleDiff {
                    title: pw.title.clone(),
                    kind: "facts".to_owned(),
                    phantomwiki: show(theirs.difference(&mine).next()),
                    rulegym: show(mine.difference(&theirs).next()),
                },
            );
        }
    }
    report.people_without_article = universe.people.len() - covered.len();
    report
}
