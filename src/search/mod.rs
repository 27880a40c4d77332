//! The search environment: Search-R1's multi-turn protocol over a retriever, rewarded by set F1
//! against the engine-verified gold answers.
//!
//! Protocol (as Search-R1's rollout code): only the action text up to the first `</search>` or
//! `</answer>` counts; the first complete `<search>...</search>` or `<answer>...</answer>` decides;
//! a search appends `\n\n<information>Doc 1(Title: "T") text\n...</information>\n\n` with the top-k
//! passages; an answer ends the episode with its reward; neither tag gives Search-R1's "invalid
//! action" observation (or ends the episode when configured); the turn cap ends it with reward 0.
//!
//! Token budgets (off by default; PhantomEnvironments' preset sets them): `max_action_tokens`
//! cuts each action to its first N tokens before it is parsed (as a generation cap would), and
//! `max_context_tokens` ends the episode with reward 0 when the conversation (prompt, actions
//! and observations) would exceed N tokens. Tokens are counted by the episode's
//! [`TokenCounter`] (the `ceil(chars / 4)` approximation unless a real tokenizer is given with
//! [`SearchEnv::with_token_counter`]).
//!
//! [`oracle`] derives a question's oracle trajectory from its proof and replays it here.

pub mod oracle;
pub mod session;

use crate::env::tokens::{ApproxTokenCounter, TokenCounter};
use crate::env::{Environment, Span, Step};
use crate::llm::{ChatMessage, Role};
use crate::retrieval::{Document, SearchIndex};
use crate::reward::{ScoreMode, score};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Search-R1's observation for an action with neither tag.
pub const INVALID_ACTION: &str = "\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n";

/// The default instruction (Search-R1's, asking for a comma-separated list of all answers).
pub const DEFAULT_PROMPT: &str = "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. After reasoning, if you find you lack some knowledge, you can call a search engine by <search> query </search> and it will return the top searched results between <information> and </information>. You can search as many times as your want. If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. If there are several answers, list them all, separated by commas. For example, <answer> Beijing </answer>. Question: {question}\n";

/// Anything that returns the top-k passages for queries (an index in memory, a remote server).
pub trait Retriever: Send + Sync {
    /// Top-`k` passages for each query, best first.
    fn retrieve(&self, queries: &[&str], k: usize) -> crate::Result<Vec<Vec<Document>>>;
}

impl Retriever for SearchIndex {
    fn retrieve(&self, queries: &[&str], k: usize) -> crate::Result<Vec<Vec<Document>>> {
        let docs = self.docs();
        Ok(self
            .search(queries, k.min(docs.len()).max(1))?
            .into_iter()
            .map(|hits| {
                hits.into_iter()
                    .map(|h| docs[h.index as usize].clone())
                    .collect()
            })
            .collect())
    }
}

/// Knobs of the search environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchEnvConfig {
    /// Passages per search.
    pub top_k: usize,
    /// Turn cap (10 in training, 20 at evaluation in the paper).
    pub max_turns: usize,
    /// End the episode (reward 0) on an action with neither tag, instead of the invalid-action
    /// observation.
    pub end_on_invalid: bool,
    /// Answer normalisation.
    pub score_mode: ScoreMode,
    /// The user prompt; `{question}` is replaced by the question.
    pub prompt: String,
    /// An optional system prompt.
    pub system_prompt: Option<String>,
    /// Generated tokens per turn: each action is cut to its first N tokens before it is
    /// parsed [off; PhantomEnvironments ~500].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_action_tokens: Option<usize>,
    /// Tokens of the whole conversation: an episode that would grow past it ends with reward 0
    /// [off; PhantomEnvironments 8,192 in training, 32,768 at evaluation].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_context_tokens: Option<usize>,
}

impl Default for SearchEnvConfig {
    fn default() -> Self {
        SearchEnvConfig {
            top_k: 3,
            max_turns: 10,
            end_on_invalid: false,
            score_mode: ScoreMode::Squad,
            prompt: DEFAULT_PROMPT.to_owned(),
            system_prompt: None,
            max_action_tokens: None,
            max_context_tokens: None,
        }
    }
}

impl SearchEnvConfig {
    /// Checks every knob.
    pub fn validate(&self) -> crate::Result<()> {
        if !(1..=100).contains(&self.top_k) {
            return Err(crate::Error::Config(format!(
                "top_k must be in 1..=100, got {}",
                self.top_k
            )));
        }
        if !(1..=1000).contains(&self.max_turns) {
            return Err(crate::Error::Config(format!(
                "max_turns must be in 1..=1000, got {}",
                self.max_turns
            )));
        }
        for (name, value) in [
            ("max_action_tokens", self.max_action_tokens),
            ("max_context_tokens", self.max_context_tokens),
        ] {
            if let Some(v) = value
                && !(1..=10_000_000).contains(&v)
            {
                return Err(crate::Error::Config(format!(
                    "{name} must be in 1..=10000000, got {v}"
                )));
            }
        }
        if !self.prompt.contains("{question}") {
            return Err(crate::Error::Config(
                "prompt must contain {question}".into(),
            ));
        }
        Ok(())
    }
}

/// One question as the environment needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchTask {
    /// The question.
    pub question: String,
    /// Gold answers.
    pub answers: Vec<String>,
    /// Ids of the articles on the question's proof path (for the "gold retrieved" metric).
    pub gold_docs: Vec<String>,
}

/// One episode of the search environment. Cheap to construct (an `Arc` and the task).
pub struct SearchEnv {
    retriever: Arc<dyn Retriever>,
    config: SearchEnvConfig,
    task: SearchTask,
    tokens: Arc<dyn TokenCounter>,
    context_tokens: usize,
    turn: usize,
    searches: usize,
    done: bool,
}

impl SearchEnv {
    /// An episode for `task` (the config is validated).
    pub fn new(
        retriever: Arc<dyn Retriever>,
        config: SearchEnvConfig,
        task: SearchTask,
    ) -> crate::Result<Self> {
        config.validate()?;
        Ok(SearchEnv {
            retriever,
            config,
            task,
            tokens: Arc::new(ApproxTokenCounter),
            context_tokens: 0,
            turn: 0,
            searches: 0,
            done: false,
        })
    }

    /// Counts the token budgets with `counter` (a real tokenizer) instead of the `ceil(chars /
    /// 4)` approximation.
    pub fn with_token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.tokens = counter;
        self
    }

    /// The task of this episode.
    pub fn task(&self) -> &SearchTask {
        &self.task
    }

    /// The environment's knobs.
    pub fn config(&self) -> &SearchEnvConfig {
        &self.config
    }
}

/// The action up to the end of the first `</search>` or `</answer>`, as Search-R1's stop strings.
pub fn truncate_action(action: &str) -> &str {
    let end = ["</search>", "</answer>"]
        .iter()
        .filter_map(|t| action.find(t).map(|i| i + t.len()))
        .min();
    end.map_or(action, |e| &action[..e])
}

/// The first complete `<search>...</search>` or `<answer>...</answer>`: (tag, content).
pub fn parse_action(action: &str) -> Option<(&'static str, &str)> {
    let mut best: Option<(usize, &'static str, &str)> = None;
    for tag in ["search", "answer"] {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        let mut from = 0;
        while let Some(start) = action[from..].find(&open).map(|i| i + from) {
            let body = start + open.len();
            if let Some(end) = action[body..].find(&close) {
                if best.is_none_or(|(s, _, _)| start < s) {
                    best = Some((start, tag, &action[body..body + end]));
                }
                break;
            }
            from = body;
        }
    }
    best.map(|(_, tag, content)| (tag, content))
}

/// A retriever over no documents: every search returns no passages. For what needs the
/// environment but no corpus: the prompts of an export, or the reward of a single turn
/// (`rulegym.trl`'s single-turn reward steps an environment over it).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRetrieval;

impl Retriever for NoRetrieval {
    fn retrieve(&self, queries: &[&str], _k: usize) -> crate::Result<Vec<Vec<Document>>> {
        Ok(vec![Vec::new(); queries.len()])
    }
}

/// Search-R1's `<information>` block for passages.
pub fn information<D: std::borrow::Borrow<Document>>(passages: &[D]) -> String {
    let mut refs = String::new();
    for (i, p) in passages.iter().enumerate() {
        let p = p.borrow();
        let (title, text) = p.contents.split_once('\n').unwrap_or((&p.contents, ""));
        refs.push_str(&format!("Doc {}(Title: {title}) {text}\n", i + 1));
    }
    format!("\n\n<information>{}</information>\n\n", refs.trim())
}

impl SearchEnv {
    fn finish(&mut self, reward: f64, meta: BTreeMap<String, serde_json::Value>) -> Step {
        self.done = true;
        Step {
            observations: Vec::new(),
            reward,
            done: true,
            metadata: meta,
            env_spans: Vec::new(),
        }
    }

    fn observe(&mut self, text: String, meta: BTreeMap<String, serde_json::Value>) -> Step {
        let span = Span {
            start: 0,
            end: text.len(),
        };
        Step {
            observations: vec![ChatMessage::text(Role::User, text)],
            reward: 0.0,
            done: false,
            metadata: meta,
            env_spans: vec![span],
        }
    }
}

impl Environment for SearchEnv {
    fn reset(&mut self) -> crate::Result<Vec<ChatMessage>> {
        self.turn = 0;
        self.searches = 0;
        self.done = false;
        self.context_tokens = 0;
        let mut messages = Vec::new();
        if let Some(system) = &self.config.system_prompt {
            messages.push(ChatMessage::text(Role::System, system.clone()));
        }
        messages.push(ChatMessage::text(
            Role::User,
            self.config
                .prompt
                .replace("{question}", &self.task.question),
        ));
        if self.config.max_context_tokens.is_some() {
            self.context_tokens = messages
                .iter()
                .map(|m| self.tokens.count(m.content_str()))
                .sum();
        }
        Ok(messages)
    }

    fn step(&mut self, action: &str) -> crate::Result<Step> {
        self.step_top_k(action, self.config.top_k)
            .map(|(step, _)| step)
    }
}

impl SearchEnv {
    /// [`Environment::step`] with `top_k` passages for a search instead of the configured
    /// number, also returning the retrieved passages (empty unless the action was a search):
    /// the tool-call sessions ([`session`]) let a caller choose `k`.
    pub fn step_top_k(
        &mut self,
        action: &str,
        top_k: usize,
    ) -> crate::Result<(Step, Vec<Document>)> {
        if self.done {
            return Err(crate::Error::EpisodeOver);
        }
        self.turn += 1;
        let mut meta = BTreeMap::from([("turn".to_owned(), json!(self.turn))]);
        let action = match self.config.max_action_tokens {
            Some(max) => {
                let cut = self.tokens.truncate(action, max);
                if cut.len() < action.len() {
                    meta.insert("action_truncated".into(), json!(true));
                }
                cut
            }
            None => action,
        };
        let action = truncate_action(action);
        if self.config.max_context_tokens.is_some() {
            self.context_tokens += self.tokens.count(action);
        }
        let mut retrieved = Vec::new();
        let step = match parse_action(action) {
            Some(("answer", content)) => {
                let s = score(content, &self.task.answers, self.config.score_mode);
                meta.insert("answer".into(), json!(content.trim()));
                meta.insert("f1".into(), json!(s.f1));
                meta.insert("em".into(), json!(s.em));
                meta.insert("precision".into(), json!(s.precision));
                meta.insert("recall".into(), json!(s.recall));
                if s.f1 == 0.0 && content.trim().is_empty() {
                    meta.insert("reason".into(), json!("empty answer"));
                }
                meta.insert("searches".into(), json!(self.searches));
                return Ok((self.finish(s.f1, meta), Vec::new()));
            }
            Some((_, query)) if !query.trim().is_empty() => {
                let query = query.trim();
                self.searches += 1;
                let passages: Vec<Document> = self
                    .retriever
                    .retrieve(&[query], top_k)?
                    .into_iter()
                    .next()
                    .unwrap_or_default();
                let ids: Vec<&str> = passages.iter().map(|p| p.id.as_str()).collect();
                let gold = ids
                    .iter()
                    .any(|id| self.task.gold_docs.iter().any(|g| g == id));
                meta.insert("query".into(), json!(query));
                meta.insert("retrieved_ids".into(), json!(ids));
                meta.insert("gold_retrieved".into(), json!(gold));
                let text = information(&passages);
                retrieved = passages;
                Some(text)
            }
            Some(_) => {
                meta.insert("reason".into(), json!("empty search query"));
                None
            }
            None => {
                meta.insert("reason".into(), json!("neither <search> nor <answer>"));
                None
            }
        };
        meta.insert("searches".into(), json!(self.searches));
        let invalid = step.is_none();
        if (invalid && self.config.end_on_invalid) || self.turn >= self.config.max_turns {
            if !invalid || self.turn >= self.config.max_turns {
                meta.insert("reason".into(), json!("turn cap reached without an answer"));
            }
            return Ok((self.finish(0.0, meta), retrieved));
        }
        let observation = step.unwrap_or_else(|| INVALID_ACTION.to_owned());
        if let Some(budget) = self.config.max_context_tokens {
            self.context_tokens += self.tokens.count(&observation);
            meta.insert("context_tokens".into(), json!(self.context_tokens));
            if self.context_tokens > budget {
                meta.insert("reason".into(), json!("context token budget exceeded"));
                return Ok((self.finish(0.0, meta), retrieved));
            }
        }
        Ok((self.observe(observation, meta), retrieved))
    }
}
