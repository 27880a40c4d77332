//! The report of an evaluation run: statistics per group and the `report.json` schema.

use super::episode::EpisodeRecord;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The version of `report.json` and `comparison.json` (see `schemas/eval-report.schema.json`);
/// bumped whenever a field changes meaning or disappears.
pub const REPORT_SCHEMA_VERSION: u32 = 2;

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
    /// SHA-256 of the question file played (the dataset's `questions.jsonl`, or `--questions`):
    /// which question set the figures are about (absent in reports written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions_sha256: Option<String>,
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
