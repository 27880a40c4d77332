//! Solvability: the certificate a question carries and the trait that decides it.

use super::{Anchor, Attr, Query};
use crate::universe::{PersonId, Universe};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// Whether the search environment can answer a question: its proof-derived oracle (search each
/// article the proof reads, then answer the gold set) replays to F1 = 1 within the turn cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    /// The oracle reaches F1 = 1 within `max_turns`, every search retrieving what it needs.
    pub solvable: bool,
    /// Searches the oracle makes.
    pub searches: usize,
    /// Passages per search.
    pub top_k: usize,
    /// The turn cap.
    pub max_turns: usize,
}

/// Decides solvability (implemented over the search environment by
/// [`crate::search::oracle::Certifier`]).
pub trait Certify: Sync {
    /// The certificate of `query`, whose answers are `answers`, or `None` when the question
    /// is unsolvable and `unsolvable_too` is false (the sampler then rejects it and needs no
    /// certificate: counting the searches of a plan past the turn cap can cost more than the
    /// decision).
    fn certify(
        &self,
        query: &Query,
        answers: &[String],
        unsolvable_too: bool,
    ) -> crate::Result<Option<Certificate>>;

    /// The anchors a solvable question can start from, if the certifier knows them (walks
    /// then draw their start among these instead of rejecting the others afterwards).
    fn anchors(&self) -> Option<&Anchors> {
        None
    }
}

/// The anchors whose opening search retrieves every person they denote: the only places a
/// solvable chain can start. A walk that drew its start uniformly over people (and its
/// attribute uniformly over [`Attr::ALL`]) and rejected the rest has, once accepted, exactly
/// the law of a draw uniform over these pairs, so drawing here changes which random numbers
/// are used, not the distribution of the questions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Anchors {
    /// People whose name search retrieves their own article.
    pub names: Vec<PersonId>,
    /// (person, attribute) pairs whose "<attribute> <value>" search retrieves every holder of
    /// the person's value (which therefore has at most top-k holders), person-major.
    pub attributes: Vec<(PersonId, Attr)>,
}

impl Anchors {
    /// A start person and its anchor (its name, or one of its attributes when
    /// `by_attribute`), uniform over the retrievable ones; `None` when there is none.
    pub fn draw(
        &self,
        u: &Universe,
        by_attribute: bool,
        rng: &mut impl Rng,
    ) -> Option<(PersonId, Anchor)> {
        if by_attribute {
            let &(p, attribute) = self
                .attributes
                .get(rng.random_range(0..self.attributes.len().max(1)))?;
            let value = attribute.fact().value(u.person(p)).to_owned();
            Some((p, Anchor::Attribute { attribute, value }))
        } else {
            let &p = self
                .names
                .get(rng.random_range(0..self.names.len().max(1)))?;
            Some((p, Anchor::Name(u.person(p).name.clone())))
        }
    }
}
