//! Solvability: the certificate a question carries and the trait that decides it.

use super::Query;
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
}
