//! Question text in PhantomWiki's surface forms ("the mother of the person whose occupation is
//! doctor"), with PhantomEnvironments' constraint clauses ("the friend, whose hobby is reading,
//! of ...").

use super::query::{Anchor, Chain, ChainStep, Query};
use crate::relations::relation;

/// "the person whose occupation is doctor" / "Ann Lee", then each hop wrapped around it.
pub fn chain_phrase(chain: &Chain) -> String {
    let mut phrase = match &chain.anchor {
        Anchor::Name(name) => name.clone(),
        Anchor::Attribute { attribute, value } => {
            format!("the person whose {} is {value}", attribute.noun())
        }
    };
    let mut steps = chain.steps.iter().peekable();
    // Filters right after an attribute anchor narrow "the person whose ..." itself.
    while let Some(ChainStep::Filter { attribute, value }) = steps.peek() {
        phrase = format!("{phrase} and whose {} is {value}", attribute.noun());
        steps.next();
    }
    while let Some(step) = steps.next() {
        let ChainStep::Hop(r) = step else {
            unreachable!("filters are consumed after their hop")
        };
        let noun = relation(r).map_or(r.as_str(), |r| r.singular);
        let mut clauses = Vec::new();
        while let Some(ChainStep::Filter { attribute, value }) = steps.peek() {
            clauses.push(format!("whose {} is {value}", attribute.noun()));
            steps.next();
        }
        phrase = if clauses.is_empty() {
            format!("the {noun} of {phrase}")
        } else {
            format!("the {noun}, {}, of {phrase}", clauses.join(" and "))
        };
    }
    phrase
}

/// The question text.
pub fn question_text(query: &Query) -> String {
    match query {
        Query::Who(chain) => format!("Who is {}?", chain_phrase(chain)),
        Query::What(chain, attribute) => {
            format!(
                "What is the {} of {}?",
                attribute.noun(),
                chain_phrase(chain)
            )
        }
        Query::HowMany(chain, r) => {
            let plural = relation(r).map_or(r.as_str(), |r| r.plural);
            format!("How many {plural} does {} have?", chain_phrase(chain))
        }
        Query::Older(a, b) => format!("Who is older, {}, or {}?", chain_phrase(a), chain_phrase(b)),
        Query::Younger(a, b) => {
            format!(
                "Who is younger, {}, or {}?",
                chain_phrase(a),
                chain_phrase(b)
            )
        }
        Query::BornFirst(a, b) => format!(
            "Who was born first, {}, or {}?",
            chain_phrase(a),
            chain_phrase(b)
        ),
        Query::Oldest(chain, r) | Query::Youngest(chain, r) => {
            let which = if matches!(query, Query::Oldest(..)) {
                "oldest"
            } else {
                "youngest"
            };
            let noun = relation(r).map_or(r.as_str(), |r| r.singular);
            format!("Who is the {which} {noun} of {}?", chain_phrase(chain))
        }
        Query::MostRelatives(chain, r) => {
            let plural = relation(r).map_or(r.as_str(), |r| r.plural);
            format!("Who has the most {plural} among {}?", plural_phrase(chain))
        }
    }
}

/// "the children of Ann Lee": the chain's phrase with its last relation in the plural (a chain
/// ending in a filter, or with no relation, keeps [`chain_phrase`]).
pub fn plural_phrase(chain: &Chain) -> String {
    if let Some((ChainStep::Hop(r), rest)) = chain.steps.split_last() {
        let inner = Chain {
            anchor: chain.anchor.clone(),
            steps: rest.to_vec(),
        };
        let plural = relation(r).map_or(r.as_str(), |r| r.plural);
        format!("the {plural} of {}", chain_phrase(&inner))
    } else {
        chain_phrase(chain)
    }
}
