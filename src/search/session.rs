//! The search environment driven by tool calls instead of tagged text: the scored search
//! sessions of the MCP and OpenEnv servers. A [`SearchSession`] wraps a [`SearchEnv`], so the
//! reward, the answer scoring, the turn cap and the token budgets are the environment's own;
//! `get_article` reads the index and counts as a turn like the environment's actions: the call
//! that uses the last turn without an answer ends the episode with reward 0.

use super::SearchEnv;
use crate::env::{Environment, Step};
use crate::question::Question;
use crate::retrieval::{Document, SearchIndex};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What one call of a session did.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Passages for a search, best first (the environment's retrieval; `text` is what the
    /// environment would append to the conversation).
    Passages {
        /// The environment's observation (`<information>...</information>`).
        text: String,
        /// The retrieved articles.
        docs: Vec<Document>,
    },
    /// The article asked for, or `None` when no title matches.
    Article(Option<Document>),
    /// The episode ended with this call: an answer was scored, the turn cap or the token budget
    /// was reached, or the action was invalid under `end_on_invalid`.
    Ended {
        /// The environment's metadata of the last step (`f1`, `em`, `precision`, `recall`
        /// for an answer; `reason` otherwise).
        metadata: BTreeMap<String, Value>,
    },
    /// The environment did not read the call as an action (e.g. cut by its per-turn token
    /// cap before the closing tag): its observation; the episode goes on.
    Invalid {
        /// The environment's observation.
        text: String,
    },
    /// The episode had already ended; nothing was done.
    Over,
}

/// Refuses a text the environment would parse as another action.
fn plain(field: &'static str, text: &str) -> crate::Result<()> {
    match crate::env::protocol_marker(text) {
        Some(marker) => Err(crate::Error::ProtocolMarkup { field, marker }),
        None => Ok(()),
    }
}

/// The text a step appended to the conversation (its observations, concatenated).
fn observed(step: &Step) -> String {
    step.observations
        .iter()
        .map(crate::llm::ChatMessage::content_str)
        .collect()
}

/// A scored search episode over tool calls.
pub struct SearchSession {
    env: SearchEnv,
    index: Arc<SearchIndex>,
    question: Option<Question>,
    max_turns: usize,
    turns: usize,
    done: bool,
    reward: f64,
}

impl SearchSession {
    /// A fresh episode of `question` in `env` (reset here); `index` answers `get_article`. The
    /// turn cap is the environment's.
    pub fn new(env: SearchEnv, index: Arc<SearchIndex>, question: Question) -> crate::Result<Self> {
        let mut session = SearchSession::of_task(env, index)?;
        session.question = Some(question);
        Ok(session)
    }

    /// A fresh episode of the task `env` holds (a question known only by its text and gold
    /// answers, such as a trainer's dataset row).
    pub fn of_task(mut env: SearchEnv, index: Arc<SearchIndex>) -> crate::Result<Self> {
        env.reset()?;
        let max_turns = env.config().max_turns;
        Ok(SearchSession {
            env,
            index,
            question: None,
            max_turns,
            turns: 0,
            done: false,
            reward: 0.0,
        })
    }

    /// The question being answered, when the session was made from one ([`SearchSession::new`]).
    pub fn question(&self) -> Option<&Question> {
        self.question.as_ref()
    }

    /// The question's text (what the environment's task holds).
    pub fn question_text(&self) -> &str {
        &self.env.task().question
    }

    /// Whether the episode is over.
    pub fn done(&self) -> bool {
        self.done
    }

    /// The reward: the environment's once the episode ended, 0 before.
    pub fn reward(&self) -> f64 {
        self.reward
    }

    /// Calls made (turns taken).
    pub fn turns(&self) -> usize {
        self.turns
    }

    /// The turn cap.
    pub fn max_turns(&self) -> usize {
        self.max_turns
    }

    /// Counts one call against the turn cap; false once the episode is over.
    fn turn(&mut self) -> bool {
        if self.done {
            return false;
        }
        if self.turns >= self.max_turns {
            self.done = true;
            return false;
        }
        self.turns += 1;
        true
    }

    /// The end of an episode whose last turn (`get_article`, or a search the environment did
    /// not see as its last) used the cap: reward 0, as the environment's own cap.
    fn capped(&mut self, reply: Reply) -> Reply {
        if self.turns < self.max_turns {
            return reply;
        }
        self.done = true;
        self.reward = 0.0;
        Reply::Ended {
            metadata: BTreeMap::from([
                ("turn".to_owned(), Value::from(self.turns)),
                (
                    "reason".to_owned(),
                    Value::from("turn cap reached without an answer"),
                ),
            ]),
        }
    }

    fn ended(&mut self, step: Step) -> Reply {
        self.done = true;
        self.reward = step.reward;
        Reply::Ended {
            metadata: step.metadata,
        }
    }

    /// One search of `query`: `top_k` passages (the environment's own when `None`). A query
    /// holding protocol markup is refused ([`crate::Error::ProtocolMarkup`]) and takes no turn.
    pub fn search(&mut self, query: &str, top_k: Option<usize>) -> crate::Result<Reply> {
        plain("query", query)?;
        if !self.turn() {
            return Ok(Reply::Over);
        }
        let top_k = top_k.unwrap_or(self.env.config().top_k);
        let (step, docs) = self
            .env
            .step_top_k(&format!("<search>{query}</search>"), top_k)?;
        if step.done {
            return Ok(self.ended(step));
        }
        let text = observed(&step);
        if step.metadata.contains_key("reason") {
            return Ok(self.capped(Reply::Invalid { text }));
        }
        Ok(self.capped(Reply::Passages { text, docs }))
    }

    /// The article titled `title` (exactly, else ignoring case); one turn.
    pub fn get_article(&mut self, title: &str) -> Reply {
        if !self.turn() {
            return Reply::Over;
        }
        let found = self.index.article(title).cloned();
        self.capped(Reply::Article(found))
    }

    /// Gives the final answer (comma-separated items): the environment scores it and the
    /// episode ends. An answer holding protocol markup is refused and takes no turn.
    pub fn answer(&mut self, answer: &str) -> crate::Result<Reply> {
        plain("answer", answer)?;
        if !self.turn() {
            return Ok(Reply::Over);
        }
        let step = self.env.step(&format!("<answer>{answer}</answer>"))?;
        if step.done {
            return Ok(self.ended(step));
        }
        let text = observed(&step);
        Ok(self.capped(Reply::Invalid { text }))
    }
}
