//! The article corpus: one templated Markdown article per person in PhantomWiki's format, and the
//! facts each article states.

use crate::universe::{AttributeFact, FactsWriter, PersonId, Universe};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// The family relations an article states, in PhantomWiki's order: (relation, plural).
pub const ARTICLE_RELATIONS: [(&str, &str); 8] = [
    ("sister", "sisters"),
    ("brother", "brothers"),
    ("mother", "mothers"),
    ("father", "fathers"),
    ("son", "sons"),
    ("daughter", "daughters"),
    ("wife", "wives"),
    ("husband", "husbands"),
];

/// One article.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Article {
    /// The person's full name.
    pub title: String,
    /// The Markdown article (starts with `# Title`).
    pub text: String,
    /// The facts the article states, as Prolog clauses (`sister('A','B').`).
    pub facts: Vec<String>,
}

/// A line of `articles.jsonl`: the Search-R1 corpus format plus the article's facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusRecord {
    /// Document id (the person's index).
    pub id: String,
    /// `"Title"\ntext`, as Search-R1 retrievers expect.
    pub contents: String,
    /// The facts the article states.
    pub facts: Vec<String>,
}

impl Article {
    /// The Search-R1 record: `contents` is the quoted title, a newline, and the article body
    /// without its `# Title` heading.
    pub fn record(&self, id: PersonId) -> CorpusRecord {
        CorpusRecord {
            id: id.to_string(),
            contents: self.contents(),
            facts: self.facts.clone(),
        }
    }

    /// The record's `contents`: the quoted title, a newline, and the article body without its
    /// `# Title` heading.
    pub fn contents(&self) -> String {
        let body = self
            .text
            .strip_prefix("# ")
            .and_then(|t| t.strip_prefix(self.title.as_str()))
            .and_then(|t| t.strip_prefix("\n\n"))
            .unwrap_or(&self.text);
        let mut contents = String::with_capacity(self.title.len() + 3 + body.len());
        for part in ["\"", self.title.as_str(), "\"\n", body] {
            contents.push_str(part);
        }
        contents
    }
}

/// The people `id` is related to by an article relation, sorted by name.
pub fn relatives(universe: &Universe, id: PersonId, relation: &str) -> Vec<PersonId> {
    let mut found = crate::relations::relation(relation)
        .map(|r| r.related(universe, id))
        .unwrap_or_default();
    found.sort_by(|&a, &b| universe.person(a).name.cmp(&universe.person(b).name));
    found
}

/// Appends "The sister of N is A." / "The sisters of N are A, B." to `out`.
fn sentence(out: &mut String, singular: &str, plural: &str, name: &str, values: &[&str]) {
    let (noun, verb) = if values.len() == 1 {
        (singular, " is ")
    } else {
        (plural, " are ")
    };
    for part in ["The ", noun, " of ", name, verb] {
        out.push_str(part);
    }
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(value);
    }
    out.push('.');
}

/// What an article says about one person, names resolved: the input of [`render`], the one
/// article renderer (the universe's articles and `retrieval::synthetic`'s corpus both use it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArticleContent<'a> {
    /// The person's full name (the title).
    pub name: &'a str,
    /// `(relation, plural, names)` per family relation with anyone in it, in the order written.
    pub family: Vec<(&'a str, &'a str, Vec<&'a str>)>,
    /// The person's friends (a section with no sentence when empty).
    pub friends: Vec<&'a str>,
    /// `(noun, value)` per attribute, in the order written.
    pub attributes: Vec<(&'a str, &'a str)>,
}

/// The Markdown article of `content` in PhantomWiki's format: `# Name`, then the Family,
/// Friends and Attributes sections, one sentence per relation or attribute.
pub fn render(content: &ArticleContent) -> String {
    let name = content.name;
    // Written into one string (a format per sentence and the joins cost more than the text).
    let mut out = String::with_capacity(1024);
    for part in ["# ", name, "\n\n## Family\n"] {
        out.push_str(part);
    }
    for (i, (relation, plural, names)) in content.family.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        sentence(&mut out, relation, plural, name, names);
    }
    out.push_str("\n\n## Friends\n");
    if !content.friends.is_empty() {
        sentence(&mut out, "friend", "friends", name, &content.friends);
    }
    out.push_str("\n\n## Attributes\n");
    for (i, (noun, value)) in content.attributes.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for part in ["The ", noun, " of ", name, " is ", value, "."] {
            out.push_str(part);
        }
    }
    out.push('\n');
    out
}

/// Renders the article of person `id`.
pub fn article(universe: &Universe, id: PersonId) -> Article {
    let person = universe.person(id);
    let name = person.name.as_str();
    let mut facts = Vec::new();
    let mut clause = |predicate: &str, value: &str| {
        let mut out = String::new();
        FactsWriter::clause(&mut out, predicate, &[name, value]);
        out.pop();
        facts.push(out);
    };
    let mut section = |relations: &[(&'static str, &'static str)]| {
        let mut lines = Vec::new();
        for &(relation, plural) in relations {
            let ids = relatives(universe, id, relation);
            if ids.is_empty() {
                continue;
            }
            let names: Vec<&str> = ids
                .iter()
                .map(|&r| universe.person(r).name.as_str())
                .collect();
            for n in &names {
                clause(relation, n);
            }
            lines.push((relation, plural, names));
        }
        lines
    };
    let family = section(&ARTICLE_RELATIONS);
    let friends = section(&[("friend", "friends")])
        .pop()
        .map(|(_, _, names)| names)
        .unwrap_or_default();
    let attributes: Vec<(&str, &str)> = AttributeFact::ALL
        .iter()
        .map(|&a| {
            let value = a.value(person);
            clause(a.predicate(), value);
            (a.noun(), value)
        })
        .collect();
    let text = render(&ArticleContent {
        name,
        family,
        friends,
        attributes,
    });
    Article {
        title: name.to_owned(),
        text,
        facts,
    }
}

/// Every article, in person order (rendered in parallel; the order never depends on threads).
pub fn articles(universe: &Universe) -> Vec<Article> {
    (0..universe.people.len() as PersonId)
        .into_par_iter()
        .map(|id| article(universe, id))
        .collect()
}
