//! The question record written to `questions.jsonl`: its fields, how a verified proposal fills
//! them, and PhantomWiki's difficulty.

use super::propose::Proposal;
use super::{Anchor, Certificate, Family, Query};
use crate::relations::relation;
use serde::{Deserialize, Serialize};

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
    /// `who`, `what`, `how-many` or `comparison`.
    pub kind: String,
    /// PhantomWiki's difficulty: relation weights + 1 per attribute atom + 1 per aggregation.
    pub difficulty: u32,
    /// Slot the walk started from (bidirectional sampling), if any.
    pub anchor_position: Option<usize>,
    /// Rejected walks before this question was accepted.
    pub rejections: u32,
    /// `train` or `val`.
    pub split: String,
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
    let kind = match &p.query {
        Query::Who(_) => "who",
        Query::What(..) => "what",
        Query::HowMany(..) => "how-many",
        Query::Older(..) => "comparison",
        Query::Younger(..) => "comparison-younger",
        Query::BornFirst(..) => "comparison-born-first",
        Query::Oldest(..) => "superlative-oldest",
        Query::Youngest(..) => "superlative-youngest",
        Query::MostRelatives(..) => "superlative-most",
    };
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
        kind: kind.to_owned(),
        difficulty: difficulty(&p.query),
        anchor_position: p.anchor_position,
        rejections,
        split: "train".to_owned(),
        is_aggregation: matches!(p.query, Query::HowMany(..)),
        plan: p.query.clone(),
        certificate: None,
    }
}
