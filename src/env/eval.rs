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
use crate::question::Question;
use crate::universe::Universe;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The stop strings of the Search-R1 protocol.
pub const STOP: [&str; 2] = ["</search>", "</answer>"];

/// Errors of the evaluation runner and its chat client.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The endpoint kept failing (connection, timeout, 429 or 5xx) after every retry.
    #[error("{url}: gave up after {attempts} attempt(s): {last}")]
    GaveUp {
        /// The request URL.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
    /// The endpoint answered with a status that retrying cannot fix (400, 401, 404, ...).
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        /// The request URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The response was not an OpenAI chat completion.
    #[error("{url}: unexpected response: {message}")]
    BadResponse {
        /// The request URL.
        url: String,
        /// What was wrong.
        message: String,
    },
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

/// Settings of the OpenAI-compatible chat client.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Base URL (`http://host:8000/v1`) or the full `.../chat/completions` URL.
    pub endpoint: String,
    /// The `model` field.
    pub model: String,
    /// Bearer token, if the endpoint needs one.
    pub api_key: Option<String>,
    /// Sampling temperature.
    pub temperature: f64,
    /// Tokens per turn.
    pub max_tokens: u32,
    /// The `seed` field, if any (vLLM still is not bit-reproducible).
    pub seed: Option<u64>,
    /// Timeout of one request (connect, send, wait, read).
    pub timeout: Duration,
    /// Retries after the first attempt on connection errors, timeouts, 408, 429 and 5xx.
    pub retries: u32,
    /// First backoff; doubled per retry, at most 30 s; a `Retry-After` in seconds wins.
    pub backoff: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            endpoint: "http://127.0.0.1:8000/v1".into(),
            model: "default".into(),
            api_key: None,
            temperature: 0.0,
            max_tokens: 1024,
            seed: None,
            timeout: Duration::from_secs(120),
            retries: 5,
            backoff: Duration::from_millis(500),
        }
    }
}

/// A blocking OpenAI-compatible chat-completions client with stop strings, timeouts and retries.
pub struct ChatClient {
    agent: ureq::Agent,
    url: String,
    config: ClientConfig,
}

/// The chat-completions URL of an endpoint given as a base URL or the full URL.
pub fn completions_url(endpoint: &str) -> String {
    let e = endpoint.trim_end_matches('/');
    if e.ends_with("/chat/completions") {
        e.to_owned()
    } else if e.ends_with("/v1") {
        format!("{e}/chat/completions")
    } else {
        format!("{e}/v1/chat/completions")
    }
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

impl ChatClient {
    /// A client for `config.endpoint` (no request is made yet).
    pub fn new(config: ClientConfig) -> crate::Result<Self> {
        if config.model.is_empty() {
            return Err(crate::Error::Config("model must not be empty".into()));
        }
        if !(config.endpoint.starts_with("http://") || config.endpoint.starts_with("https://")) {
            return Err(crate::Error::Config(format!(
                "endpoint must be an http(s) URL, got {:?}",
                config.endpoint
            )));
        }
        if config.timeout.is_zero() {
            return Err(crate::Error::Config("timeout must be positive".into()));
        }
        let url = completions_url(&config.endpoint);
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        Ok(ChatClient { agent, url, config })
    }

    /// The chat-completions URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn body(&self, messages: &[Message]) -> String {
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "stop": STOP,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        });
        if let Some(seed) = self.config.seed {
            body["seed"] = json!(seed);
        }
        body.to_string()
    }

    /// One attempt: Ok(text), or Err((retryable, message, retry_after)).
    fn attempt(&self, body: &str) -> Result<String, (bool, String, Option<Duration>)> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.config.api_key {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        let mut response = request
            .send(body)
            .map_err(|e| (true, e.to_string(), None))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| (true, format!("reading the response: {e}"), None))?;
        if status == 408 || status == 429 || status >= 500 {
            return Err((true, format!("HTTP {status}"), retry_after));
        }
        if status != 200 {
            let head: String = text.chars().take(300).collect();
            return Err((false, format!("HTTP {status}: {head}"), None));
        }
        let value: Value =
            serde_json::from_str(&text).map_err(|e| (false, format!("not JSON ({e})"), None))?;
        let choice = &value["choices"][0];
        if choice.is_null() {
            return Err((false, "no choices".into(), None));
        }
        let content = match &choice["message"]["content"] {
            Value::String(s) => s.as_str(),
            Value::Null => "",
            _ => return Err((false, "choices[0].message.content missing".into(), None)),
        };
        Ok(restore_stop(
            content,
            choice["finish_reason"].as_str(),
            choice["stop_reason"].as_str(),
        ))
    }
}

impl Policy for ChatClient {
    fn act(&self, messages: &[Message]) -> crate::Result<String> {
        let body = self.body(messages);
        let mut delay = self.config.backoff;
        let mut last = String::new();
        for attempt in 0..=self.config.retries {
            match self.attempt(&body) {
                Ok(text) => return Ok(text),
                Err((false, message, _)) => {
                    let (status, body) = message
                        .strip_prefix("HTTP ")
                        .and_then(|m| m.split_once(": "))
                        .and_then(|(s, b)| Some((s.parse().ok()?, b.to_owned())))
                        .unwrap_or((0, message.clone()));
                    return Err(if status == 0 {
                        EvalError::BadResponse {
                            url: self.url.clone(),
                            message,
                        }
                    } else {
                        EvalError::Status {
                            url: self.url.clone(),
                            status,
                            body,
                        }
                    }
                    .into());
                }
                Err((true, message, retry_after)) => {
                    last = message;
                    if attempt < self.config.retries {
                        std::thread::sleep(retry_after.unwrap_or(delay));
                        delay = (delay * 2).min(Duration::from_secs(30));
                    }
                }
            }
        }
        Err(EvalError::GaveUp {
            url: self.url.clone(),
            attempts: self.config.retries + 1,
            last,
        }
        .into())
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
