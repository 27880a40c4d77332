//! Model evaluation in the search environment: plays one episode per question against a policy
//! (normally an OpenAI-compatible chat endpoint: vLLM, SGLang, hosted), with bounded concurrency,
//! timeouts and retries, and summarises the episodes: mean F1/EM overall, per hops, per
//! PhantomWiki difficulty and per family, and searches per question against the proof's
//! (the "search scaling" analysis), with SVG plots and a small HTML page (see [`write_outputs`]).
//!
//! The episode loop is Search-R1's: the assistant text (generation stopped at `</search>` or
//! `</answer>`) is the action; the environment's observation is appended as the next user message.

use super::oracle::proof_plan;
use super::search::{Retriever, SearchEnv, SearchEnvConfig, SearchTask};
use super::{Environment, Message};
use crate::llm::{ChatMessage, ChatRequest, LlmBackend};
use crate::question::Question;
use crate::universe::Universe;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The stop strings of the Search-R1 protocol.
pub const STOP: [&str; 2] = ["</search>", "</answer>"];

/// Errors of the evaluation report (endpoint failures are [`crate::llm::LlmError`]s).
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// Plotting a report figure failed.
    #[error("plotting {figure}: {message}")]
    Plot {
        /// The figure file.
        figure: String,
        /// The plotter's message.
        message: String,
    },
}

/// Anything that answers a chat with the assistant's next text (an endpoint, a scripted policy).
pub trait Policy: Sync {
    /// The assistant's reply to `messages`, including the stop string it stopped at.
    fn act(&self, messages: &[Message]) -> crate::Result<String>;
}

/// Puts back the stop string an endpoint cut off (OpenAI APIs drop it from the text): the
/// `stop_reason` vLLM reports, else the closing tag of an unclosed last `<search>`/`<answer>`.
pub fn restore_stop(text: &str, finish_reason: Option<&str>, stop_reason: Option<&str>) -> String {
    if finish_reason != Some("stop") || STOP.iter().any(|s| text.ends_with(s)) {
        return text.to_owned();
    }
    if let Some(s) = stop_reason.filter(|s| STOP.contains(s)) {
        return format!("{text}{s}");
    }
    let open = ["<search>", "<answer>"]
        .iter()
        .zip(STOP)
        .filter_map(|(o, c)| text.rfind(o).map(|i| (i, o.len(), c)))
        .max_by_key(|&(i, _, _)| i);
    match open {
        Some((i, len, close)) if !text[i + len..].contains(close) => format!("{text}{close}"),
        _ => text.to_owned(),
    }
}

/// The sampling settings of each turn's request.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    /// The `model` field.
    pub model: String,
    /// Sampling temperature.
    pub temperature: f64,
    /// Tokens per turn.
    pub max_tokens: u32,
    /// The `seed` field, if any (vLLM still is not bit-reproducible).
    pub seed: Option<u64>,
}

/// A policy served by an LLM backend (the OpenAI-compatible client of [`crate::llm::openai`],
/// usually behind a record/replay [`crate::llm::CachedBackend`]): each turn is one chat request
/// with Search-R1's stop strings; a stop string the endpoint cut off is put back
/// ([`restore_stop`]).
pub struct EndpointPolicy {
    backend: Arc<dyn LlmBackend>,
    sampling: Sampling,
}

impl EndpointPolicy {
    /// A policy asking `backend` with these sampling settings; errors on an empty model name.
    pub fn new(backend: Arc<dyn LlmBackend>, sampling: Sampling) -> crate::Result<Self> {
        if sampling.model.is_empty() {
            return Err(crate::Error::Config("model must not be empty".into()));
        }
        Ok(EndpointPolicy { backend, sampling })
    }

    /// The request for one turn.
    pub fn request(&self, messages: &[Message]) -> ChatRequest {
        ChatRequest {
            temperature: Some(self.sampling.temperature),
            max_tokens: Some(self.sampling.max_tokens),
            seed: self.sampling.seed,
            stop: STOP.iter().map(|s| s.to_string()).collect(),
            ..ChatRequest::new(
                &self.sampling.model,
                messages
                    .iter()
                    .map(|m| ChatMessage::text(&m.role, m.content.clone()))
                    .collect(),
            )
        }
    }
}

impl Policy for EndpointPolicy {
    fn act(&self, messages: &[Message]) -> crate::Result<String> {
        let response = self.backend.chat(&self.request(messages))?;
        Ok(restore_stop(
            response.message.content_str(),
            response.finish_reason.as_deref(),
            response.stop_reason.as_deref(),
        ))
    }
}

/// Settings of an evaluation run.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalConfig {
    /// The environment (the turn cap defaults to 20, the paper's evaluation cap).
    pub env: SearchEnvConfig,
    /// Episodes in flight at once (>= 1).
    pub concurrency: usize,
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            env: SearchEnvConfig {
                max_turns: 20,
                ..SearchEnvConfig::default()
            },
            concurrency: 8,
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
    /// `train` or `val`.
    pub split: String,
    /// Gold answers.
    pub answers: Vec<String>,
    /// The chat: prompt, assistant turns, observations.
    pub messages: Vec<Message>,
    /// The reward (set F1; 0 without an answer).
    pub f1: f64,
    /// Exact match of the answer set.
    pub em: f64,
    /// Precision of the answer set.
    pub precision: f64,
    /// Recall of the answer set.
    pub recall: f64,
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
    let (task, oracle_searches) = task_of(u, q);
    let mut env = SearchEnv::new(retriever, config.clone(), task)?;
    let mut messages = env.reset()?;
    let mut record = EpisodeRecord {
        id: q.id.clone(),
        family: q.family.name().to_owned(),
        hops: q.hops,
        difficulty: q.difficulty,
        split: q.split.clone(),
        answers: q.answers.clone(),
        messages: Vec::new(),
        f1: 0.0,
        em: 0.0,
        precision: 0.0,
        recall: 0.0,
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
        messages.push(Message::new("assistant", action.clone()));
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
                    let result = play(u, q, retriever.clone(), policy, &config.env);
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

/// Means over a group of episodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupStats {
    /// The group's key (`all`, a hop count, a difficulty, a family).
    pub key: String,
    /// Episodes.
    pub n: usize,
    /// Mean F1.
    pub f1: f64,
    /// Mean exact match.
    pub em: f64,
    /// Mean precision.
    pub precision: f64,
    /// Mean recall.
    pub recall: f64,
    /// Mean searches per question.
    pub searches: f64,
    /// Mean searches the proof-derived oracle needs.
    pub oracle_searches: f64,
    /// Mean assistant turns.
    pub turns: f64,
    /// Fraction of episodes that ended with an answer.
    pub answered: f64,
    /// Fraction of episodes where some search returned a proof article.
    pub gold_retrieved: f64,
    /// Episodes ended by an endpoint failure.
    pub errors: usize,
}

fn stats(key: String, records: &[&EpisodeRecord]) -> GroupStats {
    let n = records.len();
    let mean = |f: &dyn Fn(&EpisodeRecord) -> f64| {
        if n == 0 {
            0.0
        } else {
            records.iter().map(|r| f(r)).sum::<f64>() / n as f64
        }
    };
    GroupStats {
        key,
        n,
        f1: mean(&|r| r.f1),
        em: mean(&|r| r.em),
        precision: mean(&|r| r.precision),
        recall: mean(&|r| r.recall),
        searches: mean(&|r| r.searches as f64),
        oracle_searches: mean(&|r| r.oracle_searches as f64),
        turns: mean(&|r| r.turns as f64),
        answered: mean(&|r| f64::from(u8::from(r.answer.is_some()))),
        gold_retrieved: mean(&|r| f64::from(u8::from(r.gold_retrieved))),
        errors: records.iter().filter(|r| r.error.is_some()).count(),
    }
}

fn grouped<K: Ord + ToString>(
    records: &[EpisodeRecord],
    key: impl Fn(&EpisodeRecord) -> K,
) -> Vec<GroupStats> {
    let mut groups: BTreeMap<K, Vec<&EpisodeRecord>> = BTreeMap::new();
    for r in records {
        groups.entry(key(r)).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(k, rs)| stats(k.to_string(), &rs))
        .collect()
}

/// The summary written to `report.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// The model name.
    pub model: String,
    /// The endpoint.
    pub endpoint: String,
    /// The turn cap.
    pub max_turns: usize,
    /// Every episode.
    pub overall: GroupStats,
    /// Per relation-hop count, ascending.
    pub by_hops: Vec<GroupStats>,
    /// Per PhantomWiki difficulty, ascending.
    pub by_difficulty: Vec<GroupStats>,
    /// Per family, by name.
    pub by_family: Vec<GroupStats>,
}

/// Summarises episodes.
pub fn report(
    records: &[EpisodeRecord],
    model: &str,
    endpoint: &str,
    max_turns: usize,
) -> EvalReport {
    let all: Vec<&EpisodeRecord> = records.iter().collect();
    EvalReport {
        model: model.to_owned(),
        endpoint: endpoint.to_owned(),
        max_turns,
        overall: stats("all".into(), &all),
        by_hops: grouped(records, |r| r.hops),
        by_difficulty: grouped(records, |r| r.difficulty),
        by_family: grouped(records, |r| r.family.clone()),
    }
}

/// Writes `trajectories.jsonl`, `report.json`, the SVG figures and `report.html` into `dir`.
pub fn write_outputs(
    dir: &Path,
    records: &[EpisodeRecord],
    report: &EvalReport,
) -> crate::Result<()> {
    let json_err = |source| crate::Error::Json {
        context: "serialising evaluation output".into(),
        source,
    };
    crate::io::write_jsonl(&dir.join("trajectories.jsonl"), records)?;
    let mut summary = serde_json::to_vec_pretty(report).map_err(json_err)?;
    summary.push(b'\n');
    crate::io::write_file_atomic(&dir.join("report.json"), &summary)?;
    let figures = super::eval_plot::figures(report)?;
    for (name, svg) in &figures {
        crate::io::write_file_atomic(&dir.join(name), svg.as_bytes())?;
    }
    let names: Vec<&str> = figures.iter().map(|(n, _)| n.as_str()).collect();
    let html = super::eval_plot::html(report, &names);
    crate::io::write_file_atomic(&dir.join("report.html"), html.as_bytes())
}
