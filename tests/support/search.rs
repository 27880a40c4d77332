//! The default universe with its questions and a flat built-in-encoder index over its articles,
//! shared by the search-environment tests (`tests/integration/search_env.rs`) and bench
//! (`benches/search_env.rs`), which both include this file with `#[path]`.

use rulegym::corpus;
use rulegym::engine::Engine;
use rulegym::question::{self, Question, QuestionConfig};
use rulegym::retrieval::SearchIndex;
use rulegym::universe::{Universe, UniverseConfig};
use std::sync::Arc;

/// A universe, its questions and a search index over its articles.
pub struct SearchData {
    /// The default universe.
    pub universe: Universe,
    /// Its questions, generated with the given config.
    pub questions: Vec<Question>,
    /// A flat index (built-in encoder) over its articles, ids = person ids.
    pub index: Arc<SearchIndex>,
}

/// Builds [`SearchData`] for the default universe, questions generated with `config`.
pub fn search_data(config: &QuestionConfig) -> SearchData {
    let universe = Universe::generate(&UniverseConfig::default()).unwrap();
    let engine = Engine::with_facts(&universe.engine_facts()).unwrap();
    let (questions, _) = question::generate(&universe, &engine, config, None).unwrap();
    let index = rulegym::dataset::build::article_index(&corpus::articles(&universe)).unwrap();
    SearchData {
        universe,
        questions,
        index: Arc::new(index),
    }
}
