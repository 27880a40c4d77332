//! The question record written to `questions.jsonl`: its fields, how a verified proposal fills
//! them, and PhantomWiki's difficulty.

use super::slot::Proposal;
use super::{Anchor, Certificate, Family, Query};
use crate::relations::relation;
use serde::{Deserialize, Serialize};

/// What a question asks for (its `kind` in `questions.jsonl`): the shape of its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuestionKind {
    /// People (`Who is the mother of ...?`).
    Who,
    /// Attribute values (`What is the hobby of ...?`).
    What,
    /// A count (`How many ... does ... have?`).
    HowMany,
    /// Which of two people is older.
    Comparison,
    /// Which of two people is younger.
    ComparisonYounger,
    /// Which of two people was born first.
    ComparisonBornFirst,
    /// The oldest of a set.
    SuperlativeOldest,
    /// The youngest of a set.
    SuperlativeYoungest,
    /// The one with the most relatives of a kind.
    SuperlativeMost,
}

impl QuestionKind {
    /// The name written in `questions.jsonl` (`who`, `how-many`, `comparison-younger`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionKind::Who => "who",
            QuestionKind::What => "what",
            QuestionKind::HowMany => "how-many",
            QuestionKind::Comparison => "comparison",
            QuestionKind::ComparisonYounger => "comparison-younger",
            QuestionKind::ComparisonBornFirst => "comparison-born-first",
            QuestionKind::SuperlativeOldest => "superlative-oldest",
            QuestionKind::SuperlativeYoungest => "superlative-youngest",
            QuestionKind::SuperlativeMost => "superlative-most",
        }
    }

    /// The kind of a query.
    pub fn of(query: &Query) -> QuestionKind {
        match query {
            Query::Who(_) => QuestionKind::Who,
            Query::What(..) => QuestionKind::What,
            Query::HowMany(..) => QuestionKind::HowMany,
            Query::Older(..) => QuestionKind::Comparison,
            Query::Younger(..) => QuestionKind::ComparisonYounger,
            Query::BornFirst(..) => QuestionKind::ComparisonBornFirst,
            Query::Oldest(..) => QuestionKind::SuperlativeOldest,
            Query::Youngest(..) => QuestionKind::SuperlativeYoungest,
            Query::MostRelatives(..) => QuestionKind::SuperlativeMost,
        }
    }
}

impl std::fmt::Display for QuestionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The split a question belongs to (`split` in `questions.jsonl`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// Training questions.
    #[default]
    Train,
    /// Held-out validation questions.
    Val,
}

impl Split {
    /// The name written in `questions.jsonl` (`train`, `val`).
    pub fn as_str(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
        }
    }

    /// The split named `name`, if it is one.
    pub fn named(name: &str) -> Option<Split> {
        match name {
            "train" => Some(Split::Train),
            "val" => Some(Split::Val),
            _ => None,
        }
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One question, as written to `questions.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// Deterministic id: family, cell or template, and index.
    pub id: String,
    /// The question text.
    pub question: String,
    /// Gold answers from the engine: sorted, distinct.
    pub answers: Vec<String>,
    /// PhantomWiki-style query atoms, outermost first.
    pub query: Vec<String>,
    /// The answer variable of `query`.
    pub answer_variable: String,
    /// Template tokens (`base`) or empty.
    pub template: Vec<String>,
    /// Template index (PhantomWiki's `type`), for `base`.
    pub template_index: Option<usize>,
    /// Family name.
    pub family: Family,
    /// Family version id.
    pub family_version: String,
    /// Relation hops (the longer chain for comparisons).
    pub hops: usize,
    /// Attribute filters along the chains (the anchor's attribute not counted).
    pub constraints: usize,
    /// What it asks for.
    pub kind: QuestionKind,
    /// PhantomWiki's difficulty: relation weights + 1 per attribute atom + 1 per aggregation.
    pub difficulty: u32,
    /// Slot the walk started from (bidirectional sampling), if any.
    pub anchor_position: Option<usize>,
    /// Rejected walks before this question was accepted.
    pub rejections: u32,
    /// Its split.
    pub split: Split,
    /// A "How many" question.
    pub is_aggregation: bool,
    /// The typed query, for environments and oracles.
    pub plan: Query,
    /// Whether the search environment can answer it (absent when generated without an index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<Certificate>,
}

/// PhantomWiki's difficulty of a query.
pub fn difficulty(query: &Query) -> u32 {
    let mut d = 0u32;
    for chain in query.chains() {
        d += chain
            .hops()
            .map(|r| relation(r).map_or(1, |r| r.weight as u32))
            .sum::<u32>();
        d += chain.filters() as u32;
        d += u32::from(matches!(chain.anchor, Anchor::Attribute { .. }));
    }
    d + match query {
        Query::What(..) => 1,
        Query::HowMany(_, r)
        | Query::Oldest(_, r)
        | Query::Youngest(_, r)
        | Query::MostRelatives(_, r) => 1 + relation(r).map_or(1, |r| r.weight as u32),
        Query::Who(_) | Query::Older(..) | Query::Younger(..) | Query::BornFirst(..) => 0,
    }
}

/// The record of an accepted proposal (`question` its text, `answers` the native screen's until
/// [verified](super::verify)), `index` its slot in the cell.
pub(super) fn record(
    family: Family,
    p: &Proposal,
    question: String,
    answers: Vec<String>,
    index: u64,
    rejections: u32,
) -> Question {
    let (query, answer_variable) = p.query.atoms();
    let chains = p.query.chains();
    Question {
        id: format!("{}-{}-{index:05}", family.name(), p.cell),
        question,
        answers,
        query,
        answer_variable,
        template: p.template.map(|t| t.tokens.clone()).unwrap_or_default(),
        template_index: p.template.map(|t| t.index),
        family,
        family_version: family.version_id().to_owned(),
        hops: chains.iter().map(|c| c.hops().count()).max().unwrap_or(0),
        constraints: chains.iter().map(|c| c.filters()).sum(),
        kind: QuestionKind::of(&p.query),
        difficulty: difficulty(&p.query),
        anchor_position: p.anchor_position,
        rejections,
        split: Split::Train,
        is_aggregation: matches!(p.query, Query::HowMany(..)),
        plan: p.query.clone(),
        certificate: None,
    }
}
