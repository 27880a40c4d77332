//! The search world: a dataset's index, articles, people and (for a scored session) one question.

use super::McpError;
use crate::question::Question;
use crate::retrieval::{Document, SearchIndex};
use crate::reward::ScoreMode;
use crate::search::session::SearchSession;
use crate::search::{SearchEnv, SearchEnvConfig, SearchTask};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Tool calls of a scored session (searches, articles, the answer): PhantomEnvironments'
/// evaluation turn cap.
pub const SCORED_MAX_TURNS: usize = 20;

/// A dataset loaded for serving: its search index (with the articles), the people's names and,
/// for scored sessions, the question every session answers.
pub struct SearchWorld {
    index: Arc<SearchIndex>,
    /// Names of the universe's people, in the dataset's order.
    people: Vec<String>,
    /// Document id -> document position.
    by_id: HashMap<String, usize>,
    question: Option<Question>,
}

impl SearchWorld {
    /// Loads the dataset directory `dir` (universe, questions) and its index (`index`, default
    /// the dataset's own `index.idx`); `question` picks the question of scored sessions by id.
    pub fn load(dir: &Path, index: Option<&Path>, question: Option<&str>) -> crate::Result<Self> {
        let universe = crate::dataset::load_universe(dir)?;
        let question = match question {
            None => None,
            Some(id) => Some(
                crate::dataset::load_questions(dir)?
                    .into_iter()
                    .find(|q| q.id == id)
                    .ok_or_else(|| McpError::UnknownQuestion(id.to_owned()))?,
            ),
        };
        let path = index
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.join(crate::dataset::INDEX_FILE));
        let index = SearchIndex::load(&path)?;
        let people = universe.people.iter().map(|p| p.name.clone()).collect();
        Ok(Self::new(Arc::new(index), people, question))
    }

    /// A world over an index already in memory.
    pub fn new(index: Arc<SearchIndex>, people: Vec<String>, question: Option<Question>) -> Self {
        let mut by_id = HashMap::new();
        for (i, d) in index.docs().iter().enumerate() {
            by_id.entry(d.id.clone()).or_insert(i);
        }
        SearchWorld {
            index,
            people,
            by_id,
            question,
        }
    }

    /// The search environment of scored sessions: the question's episode with `k` passages per
    /// search by default and the paper's evaluation turn cap (20 calls).
    pub fn env_config(&self) -> SearchEnvConfig {
        SearchEnvConfig {
            top_k: super::limits::DEFAULT_K,
            max_turns: SCORED_MAX_TURNS,
            score_mode: ScoreMode::Squad,
            ..SearchEnvConfig::default()
        }
    }

    /// A fresh scored session of the question (`None` without one): the search environment's
    /// own episode ([`SearchSession`]), so its reward, scoring and turn cap.
    pub fn session(&self) -> crate::Result<Option<SearchSession>> {
        let Some(q) = &self.question else {
            return Ok(None);
        };
        let task = SearchTask {
            question: q.question.clone(),
            answers: q.answers.clone(),
            gold_docs: Vec::new(),
        };
        let env = SearchEnv::new(self.index.clone(), self.env_config(), task)?;
        SearchSession::new(env, self.index.clone(), q.clone()).map(Some)
    }

    /// The question of scored sessions.
    pub fn question(&self) -> Option<&Question> {
        self.question.as_ref()
    }

    /// The articles (the index's documents).
    pub fn articles(&self) -> &[Document] {
        self.index.docs()
    }

    /// The people's names.
    pub fn people(&self) -> &[String] {
        &self.people
    }

    /// The top-`k` articles for `query`, best first (`k` is clamped to the corpus size): the
    /// index's exact search, as the search environment's retriever runs it.
    pub fn search(&self, query: &str, k: usize) -> crate::Result<Vec<&Document>> {
        let docs = self.index.docs();
        if docs.is_empty() {
            return Ok(Vec::new());
        }
        let hits = self.index.search(&[query], k.clamp(1, docs.len()))?;
        Ok(hits
            .into_iter()
            .next()
            .unwrap_or_default()
            .into_iter()
            .map(|h| &docs[h.index as usize])
            .collect())
    }

    /// The article titled exactly `title`, else the first whose title matches it ignoring case.
    pub fn article_by_title(&self, title: &str) -> Option<&Document> {
        self.index.article(title)
    }

    /// The article with document id `id`.
    pub fn article_by_id(&self, id: &str) -> Option<&Document> {
        self.by_id.get(id).map(|&i| &self.index.docs()[i])
    }
}
