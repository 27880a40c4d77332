//! Audits of a trainer's logged rewards: each logged response's reward beside rulegym's exact
//! reward for it, and every divergence classified by the exploit (or the miss) it shows.
//!
//! A log is JSONL. Two shapes are read, line by line:
//! - verl's rollout dump (`trainer.rollout_data_dir`, one `STEP.jsonl` per step):
//!   `{"input", "output", "gts", "score", "step", ...}`, the gold answers in `gts` (what
//!   `rulegym export --format verl` puts in `reward_model.ground_truth`: a list, a
//!   comma-separated string or `{"target": [...]}`);
//! - a plain log: `{"id" or "question", "response", "reward"[, "answers"]}`, the gold answers
//!   looked up by id or by question text in a dataset when the line has none.
//!
//! The reward a response should get is [`exact_reward`]'s (the first complete tag decides);
//! a reward equal to the set F1 of the response's *last* answer is accepted too (reading the
//! last tag is a choice, as verl's extraction makes; [`Property::SeveralTags`] only fails
//! hedging). A line that cannot be read (not JSON, no response, no reward, an unknown id) is
//! reported with its number and the audit goes on: nothing is dropped silently.

use super::{Property, exact_reward};
use crate::question::Question;
use crate::reward::{ScoreMode, last_answer, score};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// One audited response.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    /// Its line in the log (1-based).
    pub line: usize,
    /// The question's id, when the log gives one.
    pub id: Option<String>,
    /// The response the trainer rewarded.
    pub response: String,
    /// The reward it was given.
    pub reward: f64,
    /// The gold answers.
    pub answers: Vec<String>,
    /// The question text (for [`exact_reward`]), when known.
    pub question: String,
}

/// A line the audit could not use, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineError {
    /// Its line in the log (1-based).
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// Gold answers by question id and by question text (a dataset's questions).
#[derive(Debug, Default)]
pub struct GoldLookup {
    by_id: HashMap<String, (String, Vec<String>)>,
    by_text: HashMap<String, Vec<String>>,
}

impl GoldLookup {
    /// The lookup of `questions`.
    pub fn new(questions: &[Question]) -> Self {
        let mut lookup = GoldLookup::default();
        for q in questions {
            lookup
                .by_id
                .insert(q.id.clone(), (q.question.clone(), q.answers.clone()));
            lookup.by_text.insert(q.question.clone(), q.answers.clone());
        }
        lookup
    }
}

/// Reads a log's text into rollouts and the lines it could not use.
pub fn read_log(text: &str, gold: &GoldLookup) -> (Vec<Rollout>, Vec<LineError>) {
    let mut rollouts = Vec::new();
    let mut errors = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        match parse_line(line, raw, gold) {
            Ok(r) => rollouts.push(r),
            Err(message) => errors.push(LineError { line, message }),
        }
    }
    (rollouts, errors)
}

fn parse_line(line: usize, raw: &str, gold: &GoldLookup) -> Result<Rollout, String> {
    let v: Value = serde_json::from_str(raw).map_err(|e| format!("not JSON: {e}"))?;
    let text = |keys: &[&str]| keys.iter().find_map(|k| v.get(*k).and_then(Value::as_str));
    let response = text(&["response", "output", "completion"])
        .ok_or("no response (\"response\", or verl's \"output\")")?
        .to_owned();
    let reward = ["reward", "score"]
        .iter()
        .find_map(|k| v.get(*k))
        .ok_or("no reward (\"reward\", or verl's \"score\")")?;
    let reward = reward
        .as_f64()
        .filter(|r| r.is_finite())
        .ok_or_else(|| format!("the reward {reward} is not a finite number"))?;
    let id = v.get("id").and_then(Value::as_str).map(str::to_owned);
    let mut question = text(&["question"]).unwrap_or_default().to_owned();
    let answers = match v.get("answers").or_else(|| v.get("gts")) {
        Some(g) if !g.is_null() => gold_answers(g)?,
        _ => match (&id, gold.by_text.get(&question)) {
            (Some(id), _) => {
                let (text, answers) = gold
                    .by_id
                    .get(id)
                    .ok_or_else(|| format!("no question with id {id:?} in the dataset"))?;
                question = text.clone();
                answers.clone()
            }
            (None, Some(answers)) => answers.clone(),
            (None, None) if question.is_empty() => {
                return Err(
                    "no gold answers: give \"answers\" (verl: \"gts\"), an \"id\" or \
                            a \"question\" of the dataset"
                        .into(),
                );
            }
            (None, None) => return Err(format!("no question {question:?} in the dataset")),
        },
    };
    if question.is_empty() {
        question = text(&["input", "prompt"]).unwrap_or_default().to_owned();
    }
    Ok(Rollout {
        line,
        id,
        response,
        reward,
        answers,
        question,
    })
}

/// Gold answers from a list, a comma-separated string or `{"target": [...]}`.
fn gold_answers(g: &Value) -> Result<Vec<String>, String> {
    match g {
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("gold answers {g} are not strings")),
        // verl dumps with `json.dumps(default=str)`: a NumPy array of answers arrives as its
        // printed form, `['Ann Lee' "Bob O'Neil"]`.
        Value::String(s) if s.starts_with('[') && s.ends_with(']') => numpy_strings(s)
            .ok_or_else(|| format!("gold answers {s:?}: not a printed list of strings")),
        Value::String(s) => Ok(s.split(',').map(|a| a.trim().to_owned()).collect()),
        Value::Object(o) => match o.get("target") {
            Some(t) => gold_answers(t),
            None => Err(format!("gold answers {g}: an object needs \"target\"")),
        },
        _ => Err(format!("gold answers {g} are neither a list nor a string")),
    }
}

/// The items of a NumPy array of strings as Python prints it: quoted items (single or double
/// quotes) separated by spaces, commas or newlines, inside brackets.
fn numpy_strings(s: &str) -> Option<Vec<String>> {
    let mut items = Vec::new();
    let mut rest = s[1..s.len() - 1].trim_start_matches([' ', ',', '\n']);
    while let Some(quote) = rest.chars().next() {
        if quote != '\'' && quote != '"' {
            return None;
        }
        let end = rest[1..].find(quote)? + 1;
        items.push(rest[1..end].to_owned());
        rest = rest[end + 1..].trim_start_matches([' ', ',', '\n']);
    }
    Some(items)
}

/// How far a logged reward may be from the exact one before it is a divergence.
pub const DEFAULT_TOLERANCE: f64 = 1e-6;

/// One divergent rollout, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    /// Its line in the log.
    pub line: usize,
    /// The question id, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The logged reward.
    pub reward: f64,
    /// rulegym's exact reward.
    pub exact: f64,
    /// The response (its first 300 characters).
    pub response: String,
}

/// The divergences of one class.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DivergenceClass {
    /// How many rollouts.
    pub count: usize,
    /// Reward paid beyond the exact reward, summed (the reward mass an exploit earned).
    pub overpaid: f64,
    /// Reward withheld below the exact reward, summed.
    pub underpaid: f64,
    /// The first few.
    pub examples: Vec<Divergence>,
}

/// What an audit found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditReport {
    /// Rollouts compared.
    pub rollouts: usize,
    /// Rollouts whose reward is the exact one (or the last-tag choice).
    pub agree: usize,
    /// Divergent rollouts.
    pub diverge: usize,
    /// The tolerance used.
    pub tolerance: f64,
    /// Mean logged reward and mean exact reward over the compared rollouts.
    pub mean_reward: f64,
    /// Mean of rulegym's exact reward over the compared rollouts.
    pub mean_exact: f64,
    /// Reward paid beyond the exact reward, over every divergence.
    pub overpaid: f64,
    /// Divergences by the property they break (`snake_case` names of [`Property`], or
    /// `other_overpaid` / `other_underpaid`).
    pub by_property: BTreeMap<String, DivergenceClass>,
    /// Lines that could not be audited.
    pub errors: Vec<LineError>,
}

/// Examples kept per class.
const EXAMPLES: usize = 3;

/// Compares every rollout's reward with rulegym's exact reward and classifies the divergences.
pub fn audit(rollouts: &[Rollout], errors: Vec<LineError>, tolerance: f64) -> AuditReport {
    let mut report = AuditReport {
        rollouts: 0,
        agree: 0,
        diverge: 0,
        tolerance,
        mean_reward: 0.0,
        mean_exact: 0.0,
        overpaid: 0.0,
        by_property: BTreeMap::new(),
        errors,
    };
    let (mut sum, mut sum_exact) = (0.0, 0.0);
    for r in rollouts {
        let exact = match exact_reward(&r.question, &r.response, &r.answers) {
            Ok(e) => e,
            Err(e) => {
                report.errors.push(LineError {
                    line: r.line,
                    message: format!("the exact reward failed: {e}"),
                });
                continue;
            }
        };
        report.rollouts += 1;
        sum += r.reward;
        sum_exact += exact;
        let answer = last_answer([r.response.as_str()]);
        let last = answer
            .as_deref()
            .map_or(0.0, |a| score(a, &r.answers, ScoreMode::Squad).f1);
        if (r.reward - exact).abs() <= tolerance || (r.reward - last).abs() <= tolerance {
            report.agree += 1;
            continue;
        }
        report.diverge += 1;
        let class = report
            .by_property
            .entry(classify(r, answer.as_deref(), exact).to_owned())
            .or_default();
        class.count += 1;
        let delta = r.reward - exact;
        if delta > 0.0 {
            class.overpaid += delta;
            report.overpaid += delta;
        } else {
            class.underpaid -= delta;
        }
        if class.examples.len() < EXAMPLES {
            class.examples.push(Divergence {
                line: r.line,
                id: r.id.clone(),
                reward: r.reward,
                exact,
                response: r.response.chars().take(300).collect(),
            });
        }
    }
    if report.rollouts > 0 {
        report.mean_reward = sum / report.rollouts as f64;
        report.mean_exact = sum_exact / report.rollouts as f64;
    }
    report.errors.sort_by_key(|e| e.line);
    report
}

/// The property a divergent rollout breaks, read from its response and `answer`, the text of
/// its last complete answer tag. Items are keyed as the reward keys them
/// ([`crate::reward::item_key`]).
fn classify(r: &Rollout, answer: Option<&str>, exact: f64) -> &'static str {
    use crate::reward::{answer_set, item_key};
    let name = |p: Property| p.name();
    if r.reward < exact {
        return if exact >= 1.0 - super::cases::EPS {
            name(Property::GoldRenderings)
        } else {
            "other_underpaid"
        };
    }
    let Some(answer) = answer else {
        return if r.response.contains("<answer>") {
            name(Property::UnclosedTag)
        } else if r.response.contains("<think>") {
            name(Property::AnswerInThink)
        } else {
            name(Property::NoTagScoresZero)
        };
    };
    if r.response.matches("<answer>").count() > 1 {
        return name(Property::SeveralTags);
    }
    let keys: Vec<String> = answer
        .split(',')
        .filter_map(|i| item_key(i, ScoreMode::Squad))
        .collect();
    let distinct = answer_set(answer, ScoreMode::Squad);
    let gold: std::collections::BTreeSet<String> = r
        .answers
        .iter()
        .filter_map(|a| item_key(a, ScoreMode::Squad))
        .collect();
    let hits = keys.iter().filter(|k| gold.contains(*k)).count();
    if hits == 0 {
        let lower = r.response.to_lowercase();
        return if super::forms::OVERRIDES
            .iter()
            .any(|o| lower.contains(&o.to_lowercase()))
        {
            name(Property::GraderOverride)
        } else {
            name(Property::WrongScoresZero)
        };
    }
    if distinct.len() < keys.len() {
        return name(Property::RepeatedItems);
    }
    if hits < keys.len() {
        return name(Property::Stuffing);
    }
    if distinct.intersection(&gold).count() < gold.len() {
        return name(Property::SubsetBelowOne);
    }
    "other_overpaid"
}
