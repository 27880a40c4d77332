//! The episode loop: one search-environment episode per question against a [`Policy`],
//! with bounded concurrency ([`evaluate`]).

use super::policy::Policy;
use crate::env::Environment;
use crate::llm::{ChatMessage, Role};
use crate::question::Question;
use crate::search::oracle::proof_plan;
use crate::search::{Retriever, SearchEnv, SearchEnvConfig, SearchTask};
use crate::universe::Universe;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Settings of an evaluation run.
#[derive(Debug, Clone)]
pub struct EvalConfig {
    /// The environment (the turn cap defaults to 20, the paper's evaluation cap).
    pub env: SearchEnvConfig,
    /// Episodes in flight at once (>= 1).
    pub concurrency: usize,
    /// Also score each answer by token-level F1 ([`crate::reward::token_f1`]).
    pub token_f1: bool,
    /// Counts the environment's token budgets (the `ceil(chars / 4)` approximation when `None`).
    pub tokens: Option<Arc<dyn crate::env::tokens::TokenCounter>>,
}

impl PartialEq for EvalConfig {
    fn eq(&self, other: &Self) -> bool {
        self.env == other.env
            && self.concurrency == other.concurrency
            && self.token_f1 == other.token_f1
            && self.tokens.as_ref().map(|t| t.describe())
                == other.tokens.as_ref().map(|t| t.describe())
    }
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            env: SearchEnvConfig {
                max_turns: 20,
                ..SearchEnvConfig::default()
            },
            concurrency: 8,
            token_f1: false,
            tokens: None,
        }
    }
}

/// One played episode, one line of `trajectories.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    /// Question id.
    pub id: String,
    /// Question family name.
    pub family: String,
    /// Relation hops.
    pub hops: usize,
    /// PhantomWiki difficulty.
    pub difficulty: u32,
    /// The question's split.
    pub split: crate::question::Split,
    /// Gold answers.
    pub answers: Vec<String>,
    /// The chat: prompt, assistant turns, observations.
    pub messages: Vec<ChatMessage>,
    /// The reward (set F1; 0 without an answer).
    pub f1: f64,
    /// Exact match of the answer set.
    pub em: f64,
    /// Precision of the answer set.
    pub precision: f64,
    /// Recall of the answer set.
    pub recall: f64,
    /// Token-level F1 of the answer (only with [`EvalConfig::token_f1`]; 0 without an answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_f1: Option<f64>,
    /// The model's final answer, if it gave one.
    pub answer: Option<String>,
    /// Searches issued.
    pub searches: usize,
    /// Searches the proof-derived oracle needs for this question.
    pub oracle_searches: usize,
    /// Assistant turns taken.
    pub turns: usize,
    /// Whether some search returned an article on the proof path.
    pub gold_retrieved: bool,
    /// `answer`, `turn cap`, `invalid` (episode ended on an invalid action) or `error`.
    pub end: String,
    /// The endpoint failure that ended the episode, if any.
    pub error: Option<String>,
}

fn task_of(u: &Universe, q: &Question) -> (SearchTask, usize) {
    let plan = proof_plan(u, &q.plan);
    let oracle_searches = plan.attribute_searches.len() + plan.reads.len();
    let task = SearchTask {
        question: q.question.clone(),
        answers: q.answers.clone(),
        gold_docs: plan.reads.iter().map(|p| p.to_string()).collect(),
    };
    (task, oracle_searches)
}

/// Plays one episode of `q` with `policy`. An endpoint failure ends the episode with F1 = 0 and
/// the error recorded; environment errors are returned.
pub fn play(
    u: &Universe,
    q: &Question,
    retriever: Arc<dyn Retriever>,
    policy: &dyn Policy,
    config: &SearchEnvConfig,
) -> crate::Result<EpisodeRecord> {
    play_counted(u, q, retriever, policy, config, None)
}

fn play_counted(
    u: &Universe,
    q: &Question,
    retriever: Arc<dyn Retriever>,
    policy: &dyn Policy,
    config: &SearchEnvConfig,
    tokens: Option<Arc<dyn crate::env::tokens::TokenCounter>>,
) -> crate::Result<EpisodeRecord> {
    let (task, oracle_searches) = task_of(u, q);
    let mut env = SearchEnv::new(retriever, config.clone(), task)?;
    if let Some(counter) = tokens {
        env = env.with_token_counter(counter);
    }
    let mut messages = env.reset()?;
    let mut record = EpisodeRecord {
        id: q.id.clone(),
        family: q.family.name().to_owned(),
        hops: q.hops,
        difficulty: q.difficulty,
        split: q.split,
        answers: q.answers.clone(),
        messages: Vec::new(),
        f1: 0.0,
        em: 0.0,
        precision: 0.0,
        recall: 0.0,
        token_f1: None,
        answer: None,
        searches: 0,
        oracle_searches,
        turns: 0,
        gold_retrieved: false,
        end: String::new(),
        error: None,
    };
    loop {
        let action = match policy.act(&messages) {
            Ok(a) => a,
            Err(e) => {
                record.end = "error".into();
                record.error = Some(e.to_string());
                break;
            }
        };
        record.turns += 1;
        messages.push(ChatMessage::text(Role::Assistant, action.clone()));
        let step = env.step(&action)?;
        let meta = &step.metadata;
        record.searches = meta
            .get("searches")
            .and_then(Value::as_u64)
            .map_or(record.searches, |n| n as usize);
        record.gold_retrieved |= meta.get("gold_retrieved") == Some(&Value::Bool(true));
        messages.extend(step.observations);
        if step.done {
            let num = |k: &str| meta.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            record.f1 = step.reward;
            record.em = num("em");
            record.precision = num("precision");
            record.recall = num("recall");
            record.answer = meta
                .get("answer")
                .and_then(Value::as_str)
                .map(str::to_owned);
            record.end = if record.answer.is_some() {
                "answer"
            } else if record.turns >= config.max_turns {
                "turn cap"
            } else {
                "invalid"
            }
            .into();
            break;
        }
    }
    record.messages = messages;
    Ok(record)
}

/// Plays every question with at most `config.concurrency` episodes in flight; records come back
/// in question order whatever the scheduling. `progress` is called after each episode.
pub fn evaluate(
    u: &Universe,
    questions: &[Question],
    retriever: Arc<dyn Retriever>,
    policy: &dyn Policy,
    config: &EvalConfig,
    progress: &(dyn Fn(&EpisodeRecord) + Sync),
) -> crate::Result<Vec<EpisodeRecord>> {
    config.env.validate()?;
    if config.concurrency == 0 {
        return Err(crate::Error::Config(
            "concurrency must be at least 1".into(),
        ));
    }
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<crate::Result<EpisodeRecord>>>> =
        Mutex::new((0..questions.len()).map(|_| None).collect());
    let workers = config.concurrency.min(questions.len()).max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(q) = questions.get(i) else { break };
                    let result = play_counted(
                        u,
                        q,
                        retriever.clone(),
                        policy,
                        &config.env,
                        config.tokens.clone(),
                    )
                    .map(|mut r| {
                        if config.token_f1 {
                            let answer = r.answer.as_deref().unwrap_or("");
                            r.token_f1 = Some(if r.answer.is_some() {
                                crate::reward::token_f1(answer, &r.answers)
                            } else {
                                0.0
                            });
                        }
                        r
                    });
                    if let Ok(r) = &result {
                        progress(r);
                    }
                    let failed = result.is_err();
                    if let Ok(mut slots) = slots.lock() {
                        slots[i] = Some(result);
                    }
                    if failed {
                        // Stop handing out work; the first error is returned below.
                        next.store(questions.len(), Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let slots = slots
        .into_inner()
        .map_err(|_| crate::Error::ThreadPanicked("evaluation"))?;
    let mut records = Vec::with_capacity(questions.len());
    for slot in slots {
        match slot {
            Some(r) => records.push(r?),
            None => {
                return Err(crate::Error::Config(
                    "evaluation stopped before every question was played".into(),
                ));
            }
        }
    }
    Ok(records)
}
