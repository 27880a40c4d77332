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

/// The version of `report.json` and `comparison.json` (see `schemas/eval-report.schema.json`);
/// bumped whenever a field changes meaning or disappears.
pub const REPORT_SCHEMA_VERSION: u32 = 2;

/// The sampling settings of each turn's request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// The `model` field.
    pub model: String,
    /// Sampling temperature, in `[0, 2]`.
    pub temperature: f64,
    /// Nucleus sampling `top_p`, in `(0, 1]` (not sent when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Tokens per turn (>= 1).
    pub max_tokens: u32,
    /// The `seed` field, if any (vLLM still is not bit-reproducible).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Sampling {
    /// Checks the ranges: an out-of-range value is an error naming the valid range.
    pub fn validate(&self) -> crate::Result<()> {
        if self.model.is_empty() {
            return Err(crate::Error::Config("model must not be empty".into()));
        }
        if !(self.temperature.is_finite() && (0.0..=2.0).contains(&self.temperature)) {
            return Err(crate::Error::Config(format!(
                "temperature must be in [0, 2], got {}",
                self.temperature
            )));
        }
        if let Some(p) = self.top_p
            && !(p.is_finite() && p > 0.0 && p <= 1.0)
        {
            return Err(crate::Error::Config(format!(
                "top_p must be in (0, 1], got {p}"
            )));
        }
        if self.max_tokens == 0 {
            return Err(crate::Error::Config(
                "max_tokens (per turn) must be at least 1".into(),
            ));
        }
        Ok(())
    }
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
        sampling.validate()?;
        Ok(EndpointPolicy { backend, sampling })
    }

    /// The request for one turn.
    pub fn request(&self, messages: &[Message]) -> ChatRequest {
        ChatRequest {
            temperature: Some(self.sampling.temperature),
            top_p: self.sampling.top_p,
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
#[derive(Debug, Clone)]
pub struct EvalConfig {
    /// The environment (the turn cap defaults to 20, the paper's evaluation cap).
    pub env: SearchEnvConfig,
    /// Episodes in flight at once (>= 1).
    pub concurrency: usize,
    /// Also score each answer by token-level F1 ([`crate::reward::token_f1`]).
    pub token_f1: bool,
    /// Counts the environment's token budgets (the `ceil(chars / 4)` approximation when `None`).
    pub tokens: Option<Arc<dyn super::tokens::TokenCounter>>,
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
    tokens: Option<Arc<dyn super::tokens::TokenCounter>>,
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
        split: q.split.clone(),
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

/// Means over a group of episodes, with standard errors over its questions (`*_se`: the sample
/// standard deviation over the episodes divided by `sqrt(n)`; 0 when `n < 2`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupStats {
    /// The group's key (`all`, a hop count, a difficulty, a family).
    pub key: String,
    /// Episodes.
    pub n: usize,
    /// Mean F1.
    pub f1: f64,
    /// Standard error of the mean F1 over the group's questions.
    #[serde(default)]
    pub f1_se: f64,
    /// Mean exact match.
    pub em: f64,
    /// Standard error of the mean exact match.
    #[serde(default)]
    pub em_se: f64,
    /// Mean token-level F1 (runs with token F1 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_f1: Option<f64>,
    /// Standard error of the mean token-level F1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_f1_se: Option<f64>,
    /// Mean precision.
    pub precision: f64,
    /// Mean recall.
    pub recall: f64,
    /// Mean searches per question.
    pub searches: f64,
    /// Standard error of the mean searches per question.
    #[serde(default)]
    pub searches_se: f64,
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

/// Mean and standard error of the mean (sample deviation / sqrt(n); 0 when n < 2).
pub fn mean_se(values: &[f64]) -> (f64, f64) {
    let n = values.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n < 2 {
        return (mean, 0.0);
    }
    let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
    (mean, (ss / (n - 1) as f64).sqrt() / (n as f64).sqrt())
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
    let se = |f: &dyn Fn(&EpisodeRecord) -> f64| {
        mean_se(&records.iter().map(|r| f(r)).collect::<Vec<_>>()).1
    };
    let token: Option<Vec<f64>> = records.iter().map(|r| r.token_f1).collect();
    let token = token.filter(|t| !t.is_empty()).map(|t| mean_se(&t));
    GroupStats {
        key,
        n,
        f1: mean(&|r| r.f1),
        f1_se: se(&|r| r.f1),
        em: mean(&|r| r.em),
        em_se: se(&|r| r.em),
        token_f1: token.map(|t| t.0),
        token_f1_se: token.map(|t| t.1),
        precision: mean(&|r| r.precision),
        recall: mean(&|r| r.recall),
        searches: mean(&|r| r.searches as f64),
        searches_se: se(&|r| r.searches as f64),
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

/// How a run was configured: sampling, environment, universe (the `run` block of `report.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunInfo {
    /// A label for comparisons (`--label`; the model name by default).
    pub label: String,
    /// The model-family sampling preset (`qwen`, `llama`, `phi`), if one was chosen.
    #[serde(default)]
    pub sampling_preset: Option<String>,
    /// Sampling temperature.
    pub temperature: f64,
    /// Nucleus sampling `top_p` (not sent when `None`).
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Generated tokens per turn (the request's `max_tokens`).
    pub max_tokens: u32,
    /// The request seed.
    #[serde(default)]
    pub seed: Option<u64>,
    /// The environment preset (`phantomenvs`), if one was chosen.
    #[serde(default)]
    pub env_preset: Option<String>,
    /// The preset's stage (`train` or `eval`).
    #[serde(default)]
    pub stage: Option<String>,
    /// Passages per search.
    pub top_k: usize,
    /// Whether a turn without tags ends the episode.
    pub end_on_invalid: bool,
    /// Generated tokens per turn the environment accepts.
    #[serde(default)]
    pub max_action_tokens: Option<usize>,
    /// The conversation's token budget.
    #[serde(default)]
    pub max_context_tokens: Option<usize>,
    /// What counts tokens (`approx-chars/4` or `tokenizer:<path>`).
    pub token_counter: String,
    /// People in the evaluated universe (the universe-size comparison groups runs by it).
    pub universe_people: usize,
    /// The universe's seed.
    pub universe_seed: u64,
}

/// The summary written to `report.json` (schema: `schemas/eval-report.schema.json`, version
/// [`REPORT_SCHEMA_VERSION`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// [`REPORT_SCHEMA_VERSION`] (reports written before versioning read as 1).
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// The model name.
    pub model: String,
    /// The endpoint.
    pub endpoint: String,
    /// The turn cap.
    pub max_turns: usize,
    /// How the run was configured.
    #[serde(default)]
    pub run: RunInfo,
    /// Every episode.
    pub overall: GroupStats,
    /// Per relation-hop count, ascending.
    pub by_hops: Vec<GroupStats>,
    /// Per PhantomWiki difficulty, ascending.
    pub by_difficulty: Vec<GroupStats>,
    /// Per family, by name.
    pub by_family: Vec<GroupStats>,
}

fn schema_v1() -> u32 {
    1
}

/// Summarises episodes.
pub fn report(
    records: &[EpisodeRecord],
    model: &str,
    endpoint: &str,
    max_turns: usize,
    run: RunInfo,
) -> EvalReport {
    let all: Vec<&EpisodeRecord> = records.iter().collect();
    EvalReport {
        schema_version: REPORT_SCHEMA_VERSION,
        model: model.to_owned(),
        endpoint: endpoint.to_owned(),
        max_turns,
        run,
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

/// A statistic of one key (`all` or a difficulty) over several runs: the mean of the runs'
/// means with its standard error over runs (seeds), and the standard error over every question
/// of every run pooled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedStats {
    /// `all` or a PhantomWiki difficulty.
    pub key: String,
    /// Runs with at least one episode of this key.
    pub runs: usize,
    /// Episodes pooled over those runs.
    pub n: usize,
    /// Mean over runs of each run's mean F1.
    pub f1: f64,
    /// Standard error of `f1` over runs (0 with fewer than 2 runs).
    pub f1_se_seeds: f64,
    /// Standard error of the pooled mean F1 over all episodes.
    pub f1_se_questions: f64,
    /// Mean over runs of each run's mean searches per question.
    pub searches: f64,
    /// Standard error of `searches` over runs.
    pub searches_se_seeds: f64,
    /// Standard error of the pooled mean searches over all episodes.
    pub searches_se_questions: f64,
    /// Mean searches the proof-derived oracle needs.
    pub oracle_searches: f64,
    /// Mean over runs of the mean token-level F1 (when every run has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_f1: Option<f64>,
    /// Standard error of `token_f1` over runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_f1_se_seeds: Option<f64>,
}

impl SeedStats {
    /// The band drawn around a mean: the SE over seeds with 2+ runs, else over questions.
    pub fn f1_band(&self) -> f64 {
        if self.runs >= 2 {
            self.f1_se_seeds
        } else {
            self.f1_se_questions
        }
    }
    /// As [`SeedStats::f1_band`], for searches.
    pub fn searches_band(&self) -> f64 {
        if self.runs >= 2 {
            self.searches_se_seeds
        } else {
            self.searches_se_questions
        }
    }
}

/// Runs of one configuration (one group: several seeds), or of one universe size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonGroup {
    /// The group's name (`--run GROUP=DIR`), or `<N> people` for universe sizes.
    pub group: String,
    /// The run labels in it, in command-line order.
    pub runs: Vec<String>,
    /// People in the universe of its runs (the largest, if they differ).
    pub universe_people: usize,
    /// Every episode.
    pub overall: SeedStats,
    /// Per PhantomWiki difficulty, ascending.
    pub by_difficulty: Vec<SeedStats>,
}

/// A difference of mean F1 between a group and the baseline group, for one key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GapStats {
    /// `all` or a PhantomWiki difficulty (keys both groups have).
    pub key: String,
    /// Mean F1 of the group minus mean F1 of the baseline.
    pub f1_gap: f64,
    /// Standard error of the gap, `sqrt(se_group^2 + se_baseline^2)` (runs independent), each
    /// side's band error (over seeds with 2+ runs, else over questions).
    pub f1_gap_se: f64,
}

/// A group against the baseline group (e.g. the knowledge-advantage gap: a model trained on
/// real-world data minus the same model trained on fictional data, `--baseline fictional`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// The group.
    pub group: String,
    /// The baseline group.
    pub baseline: String,
    /// Over every episode.
    pub overall: GapStats,
    /// Per PhantomWiki difficulty both groups have, ascending.
    pub by_difficulty: Vec<GapStats>,
}

/// `comparison.json`: several runs side by side (schema version [`REPORT_SCHEMA_VERSION`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// [`REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// One entry per group, in first-appearance order.
    pub groups: Vec<ComparisonGroup>,
    /// One entry per universe size, ascending (the unseen-universe comparison: 1K vs 10K).
    pub by_universe: Vec<ComparisonGroup>,
    /// Every other group minus the baseline group (only with a baseline).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<Gap>,
}

fn gap_stats(a: &SeedStats, b: &SeedStats) -> GapStats {
    GapStats {
        key: a.key.clone(),
        f1_gap: a.f1 - b.f1,
        f1_gap_se: (a.f1_band().powi(2) + b.f1_band().powi(2)).sqrt(),
    }
}

fn gap(group: &ComparisonGroup, baseline: &ComparisonGroup) -> Gap {
    Gap {
        group: group.group.clone(),
        baseline: baseline.group.clone(),
        overall: gap_stats(&group.overall, &baseline.overall),
        by_difficulty: group
            .by_difficulty
            .iter()
            .filter_map(|a| {
                let b = baseline.by_difficulty.iter().find(|b| b.key == a.key)?;
                Some(gap_stats(a, b))
            })
            .collect(),
    }
}

/// (n, sum, sum of squares) of a group, rebuilt exactly from its mean and standard error.
fn moments(n: usize, mean: f64, se: f64) -> (f64, f64, f64) {
    let n = n as f64;
    let var = se * se * n; // se = sd / sqrt(n)
    let sum = n * mean;
    let sum2 = if n >= 2.0 {
        (n - 1.0) * var + n * mean * mean
    } else {
        n * mean * mean
    };
    (n, sum, sum2)
}

fn pooled_se(parts: &[(usize, f64, f64)]) -> f64 {
    let (n, sum, sum2) = parts
        .iter()
        .map(|&(n, m, s)| moments(n, m, s))
        .fold((0.0, 0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    if n < 2.0 {
        return 0.0;
    }
    let mean = sum / n;
    let var = ((sum2 - n * mean * mean) / (n - 1.0)).max(0.0);
    (var / n).sqrt()
}

fn seed_stats(key: String, stats: &[&GroupStats]) -> SeedStats {
    let f1: Vec<f64> = stats.iter().map(|g| g.f1).collect();
    let searches: Vec<f64> = stats.iter().map(|g| g.searches).collect();
    let token: Option<Vec<f64>> = stats.iter().map(|g| g.token_f1).collect();
    let token = token.filter(|t| !t.is_empty()).map(|t| mean_se(&t));
    let (f1, f1_se_seeds) = mean_se(&f1);
    let (searches, searches_se_seeds) = mean_se(&searches);
    let n: usize = stats.iter().map(|g| g.n).sum();
    let oracle = if n == 0 {
        0.0
    } else {
        stats
            .iter()
            .map(|g| g.oracle_searches * g.n as f64)
            .sum::<f64>()
            / n as f64
    };
    SeedStats {
        key,
        runs: stats.len(),
        n,
        f1,
        f1_se_seeds,
        f1_se_questions: pooled_se(
            &stats
                .iter()
                .map(|g| (g.n, g.f1, g.f1_se))
                .collect::<Vec<_>>(),
        ),
        searches,
        searches_se_seeds,
        searches_se_questions: pooled_se(
            &stats
                .iter()
                .map(|g| (g.n, g.searches, g.searches_se))
                .collect::<Vec<_>>(),
        ),
        oracle_searches: oracle,
        token_f1: token.map(|t| t.0),
        token_f1_se_seeds: token.map(|t| t.1),
    }
}

fn comparison_group(group: String, runs: &[&(String, EvalReport)]) -> ComparisonGroup {
    let overall: Vec<&GroupStats> = runs.iter().map(|(_, r)| &r.overall).collect();
    let mut keys: BTreeMap<i64, Vec<&GroupStats>> = BTreeMap::new();
    for (_, r) in runs {
        for g in &r.by_difficulty {
            if let Ok(k) = g.key.parse::<i64>() {
                keys.entry(k).or_default().push(g);
            }
        }
    }
    ComparisonGroup {
        group,
        runs: runs.iter().map(|(_, r)| r.run.label.clone()).collect(),
        universe_people: runs
            .iter()
            .map(|(_, r)| r.run.universe_people)
            .max()
            .unwrap_or(0),
        overall: seed_stats("all".into(), &overall),
        by_difficulty: keys
            .into_iter()
            .map(|(k, gs)| seed_stats(k.to_string(), &gs))
            .collect(),
    }
}

/// Compares runs given as (group, report): runs of one group are seeds of one configuration
/// (means and standard errors over seeds and over questions); runs are also grouped by universe
/// size; with a `baseline` group, every other group's F1 gap to it. Errors on no runs and on a
/// baseline that names no group (listing the groups).
pub fn compare(runs: &[(String, EvalReport)], baseline: Option<&str>) -> crate::Result<Comparison> {
    if runs.is_empty() {
        return Err(crate::Error::Config(
            "compare needs at least one --run GROUP=DIR".into(),
        ));
    }
    let mut order: Vec<&str> = Vec::new();
    for (g, _) in runs {
        if !order.contains(&g.as_str()) {
            order.push(g);
        }
    }
    let groups: Vec<ComparisonGroup> = order
        .iter()
        .map(|g| {
            let members: Vec<&(String, EvalReport)> =
                runs.iter().filter(|(name, _)| name == g).collect();
            comparison_group((*g).to_owned(), &members)
        })
        .collect();
    let gaps = match baseline {
        None => Vec::new(),
        Some(name) => {
            let base = groups.iter().find(|g| g.group == name).ok_or_else(|| {
                crate::Error::Config(format!(
                    "--baseline {name:?} is not a group (groups: {})",
                    order.join(", ")
                ))
            })?;
            groups
                .iter()
                .filter(|g| g.group != name)
                .map(|g| gap(g, base))
                .collect()
        }
    };
    let mut sizes: BTreeMap<usize, Vec<&(String, EvalReport)>> = BTreeMap::new();
    for run in runs {
        sizes
            .entry(run.1.run.universe_people)
            .or_default()
            .push(run);
    }
    let by_universe = sizes
        .into_iter()
        .map(|(people, members)| comparison_group(format!("{people} people"), &members))
        .collect();
    Ok(Comparison {
        schema_version: REPORT_SCHEMA_VERSION,
        groups,
        by_universe,
        gaps,
    })
}

/// Writes `comparison.json`, `search_scaling.svg`, `universe_size.svg` and `comparison.html`
/// into `dir`.
pub fn write_comparison(dir: &Path, comparison: &Comparison) -> crate::Result<()> {
    let mut json = serde_json::to_vec_pretty(comparison).map_err(|source| crate::Error::Json {
        context: "serialising comparison.json".into(),
        source,
    })?;
    json.push(b'\n');
    crate::io::write_file_atomic(&dir.join("comparison.json"), &json)?;
    let figures = super::eval_plot::comparison_figures(comparison)?;
    for (name, svg) in &figures {
        crate::io::write_file_atomic(&dir.join(name), svg.as_bytes())?;
    }
    let names: Vec<&str> = figures.iter().map(|(n, _)| n.as_str()).collect();
    let html = super::eval_plot::comparison_html(comparison, &names);
    crate::io::write_file_atomic(&dir.join("comparison.html"), html.as_bytes())
}
