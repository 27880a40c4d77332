//! proptest strategies for property tests of reward code (feature `testkit`): universes, their
//! questions, and responses with rulegym's exact reward and the property each one tests. They
//! draw from the one case generator of [`crate::rewardcheck`] (the one `rulegym reward-check`
//! and Python's `rulegym.testing` use).
//!
//! ```no_run
//! use proptest::prelude::*;
//! use rulegym::testkit;
//! let world = testkit::universe(7, 10).unwrap();
//! proptest!(|(case in testkit::responses(world.clone()))| {
//!     let mine = my_reward(&case.response, &case.spec.answers);
//!     prop_assert!(case.holds(mine, None) || case.base.is_some(), "{}: {mine}", case.response);
//! });
//! # fn my_reward(_: &str, _: &[String]) -> f64 { 0.0 }
//! ```

use crate::rewardcheck::cases::SourceQuestion;
use crate::rewardcheck::{Case, CaseSource, Property};
use proptest::prelude::*;
use std::sync::Arc;

/// The seed of the case streams the strategies draw (the strategies' own randomness picks the
/// index within them).
const CASE_SEED: u64 = 0;

/// A universe built in memory from `seed` with `trees` family trees and its default questions.
pub fn universe(seed: u64, trees: usize) -> crate::Result<Arc<CaseSource>> {
    CaseSource::generate(seed, trees).map(Arc::new)
}

/// Fresh universes: a seed in `1..=2^32` and `trees` family trees each. Building one takes
/// tens of milliseconds per tree; keep the case count of such tests small.
pub fn universes(trees: usize) -> impl Strategy<Value = Arc<CaseSource>> {
    (1u64..=1 << 32).prop_map(move |seed| {
        universe(seed, trees).expect("a universe of a valid default config always builds")
    })
}

/// The questions of `source` that have gold answers.
pub fn questions(source: Arc<CaseSource>) -> impl Strategy<Value = SourceQuestion> {
    let n = source.questions().len();
    (0..n).prop_map(move |i| source.questions()[i].clone())
}

/// Responses to any question of `source`, each an instance of one of the generated
/// [`Property`]s, with rulegym's exact reward ([`Case::expected`]); [`Case::holds`] judges a
/// reward of it.
pub fn responses(source: Arc<CaseSource>) -> impl Strategy<Value = Case> {
    (0..Property::ANSWER_GENERATED.len(), any::<u64>()).prop_filter_map(
        "the property needs a multi-answer question",
        move |(p, index)| {
            let spec = source.case(CASE_SEED, Property::ANSWER_GENERATED[p], index)?;
            Some(Case::new(spec).expect("rulegym's reward of a rendered case never fails"))
        },
    )
}

/// Responses to question `question` (an index into [`CaseSource::questions`]) of `source`.
pub fn responses_to(source: Arc<CaseSource>, question: usize) -> impl Strategy<Value = Case> {
    (0..Property::ANSWER_GENERATED.len(), any::<u64>()).prop_filter_map(
        "the property does not apply to this question",
        move |(p, index)| {
            let spec =
                source.case_for(question, CASE_SEED, Property::ANSWER_GENERATED[p], index)?;
            Some(Case::new(spec).expect("rulegym's reward of a rendered case never fails"))
        },
    )
}
