//! Degenerate questions: a chain that passes the same person twice, or an answer that the
//! question names. "Who is the child of the mother of Ann?" (Ann, when she has no siblings)
//! teaches a policy to answer the name in the question; generation rejects such proposals in
//! every family.
//!
//! The check is set-at-a-time, like the answers: slot 0 of a chain is the anchor's set (after
//! the filters that narrow it), slot i the set after hop i and its filters. A chain is
//! degenerate when two of its slots share a person; a question is degenerate when an answer is
//! a person named as the anchor of a chain with at least one hop (a zero-hop comparison side,
//! "Who is older, Ann or Bob?", names its candidates by design), or, for attribute questions,
//! a value the question itself states ("What is the hobby of the friend of the person whose
//! hobby is chess?" -> chess).

use super::query::{Anchor, Chain, ChainStep, Query, QueryError};
use crate::relations::relation;
use crate::universe::{PersonId, Universe};
use serde::{Deserialize, Serialize};

/// Why a question is degenerate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Degeneracy {
    /// A chain reaches `person` at two slots.
    Revisits {
        /// The chain's position in the query.
        chain: usize,
        /// Whom it reaches twice.
        person: String,
    },
    /// An answer is stated in the question.
    NamesAnswer(String),
}

/// The slot sets of `chain`: the anchor's set, then the set after each hop (filters applied).
pub fn slot_sets(u: &Universe, chain: &Chain) -> Result<Vec<Vec<PersonId>>, QueryError> {
    let anchor = Chain {
        anchor: chain.anchor.clone(),
        steps: Vec::new(),
    };
    let mut set = anchor.evaluate_native(u)?;
    let mut slots = Vec::new();
    for step in &chain.steps {
        match step {
            ChainStep::Filter { attribute, value } => {
                set.retain(|&p| attribute.fact().value(u.person(p)) == value);
            }
            ChainStep::Hop(r) => {
                let r = relation(r).ok_or_else(|| QueryError::UnknownRelation(r.clone()))?;
                let mut next: Vec<PersonId> = set.iter().flat_map(|&p| r.related(u, p)).collect();
                next.sort_unstable();
                next.dedup();
                slots.push(std::mem::replace(&mut set, next));
            }
        }
    }
    slots.push(set);
    Ok(slots)
}

/// The first reason `query` with `answers` is degenerate, if any.
pub fn degeneracy(
    u: &Universe,
    query: &Query,
    answers: &[String],
) -> Result<Option<Degeneracy>, QueryError> {
    // Superlatives take one more step (to the relatives compared), so their answers are a slot.
    let extra_step = matches!(query, Query::Oldest(..) | Query::Youngest(..));
    for (i, chain) in query.chains().into_iter().enumerate() {
        let slots = slot_sets(u, chain)?;
        let mut seen: Vec<PersonId> = Vec::new();
        for slot in &slots {
            if let Some(&p) = slot.iter().find(|p| seen.contains(p)) {
                return Ok(Some(Degeneracy::Revisits {
                    chain: i,
                    person: u.person(p).name.clone(),
                }));
            }
            seen.extend(slot);
        }
        if extra_step && let Some(p) = seen.iter().find(|&&p| answers.contains(&u.person(p).name)) {
            return Ok(Some(Degeneracy::Revisits {
                chain: i,
                person: u.person(*p).name.clone(),
            }));
        }
    }
    let stated: Vec<&str> = match query {
        Query::What(..) => query
            .chains()
            .into_iter()
            .flat_map(|c| {
                let anchor = match &c.anchor {
                    Anchor::Attribute { value, .. } => Some(value.as_str()),
                    Anchor::Name(_) => None,
                };
                anchor
                    .into_iter()
                    .chain(c.steps.iter().filter_map(|s| match s {
                        ChainStep::Filter { value, .. } => Some(value.as_str()),
                        ChainStep::Hop(_) => None,
                    }))
            })
            .collect(),
        _ => query
            .chains()
            .into_iter()
            .filter(|c| c.hops().next().is_some())
            .filter_map(|c| match &c.anchor {
                Anchor::Name(name) => Some(name.as_str()),
                Anchor::Attribute { .. } => None,
            })
            .collect(),
    };
    Ok(answers
        .iter()
        .find(|a| stated.contains(&a.as_str()))
        .map(|a| Degeneracy::NamesAnswer(a.clone())))
}
