//! Audits of a trainer's logged rewards: each logged response's reward beside rulegym's exact
//! reward for it, and every divergence classified by the exploit (or the miss) it shows.
//!
//! A log is JSONL. Two shapes are read, line by line:
//! - verl's rollout dump (`trainer.rollout_data_dir`, one `STEP.jsonl` per step):
//!   `{"input", "output", "gts", "score", "step", ...}`, the gold answers in `gts` (what
//!   `rulegym export --format verl` puts in `reward_model.ground_truth`: a list, a
//!   comma-separated string or `{"target": [...]}`);
//! - a plain log: `{"id" or "question" or "prompt", "response", "reward"[, "answers"]
//!   [, "step"]}`, the gold answers looked up in a dataset when the line has none: by id, by
//!   question text, or as the dataset question a logged prompt asks ([`GoldLookup::asked_in`]).
//!
//! A line's `step` (verl's dump has one; a plain log may) groups the report's per-step counts.
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
    /// The training step that logged it, when the log says.
    pub step: Option<i64>,
}

/// A line the audit could not use, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineError {
    /// Its line in the log (1-based).
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// Gold answers by question id and by question text (a dataset's questions), and the question
/// a logged prompt asks.
#[derive(Debug, Default)]
pub struct GoldLookup {
    by_id: HashMap<String, (String, Vec<String>)>,
    by_text: HashMap<String, Vec<String>>,
    /// The distinct question lengths in bytes, longest first, by a question's last character.
    lengths_by_last: HashMap<char, Vec<usize>>,
}

impl GoldLookup {
    /// The lookup of `questions`.
    pub fn new(questions: &[Question]) -> Self {
        let mut lookup = GoldLookup::default();
        for q in questions {
            lookup.insert(&q.id, &q.question, &q.answers);
        }
        lookup
    }

    /// Adds a question (a later one with the same id or text replaces the earlier).
    pub fn insert(&mut self, id: &str, question: &str, answers: &[String]) {
        self.by_id
            .insert(id.to_owned(), (question.to_owned(), answers.to_vec()));
        self.by_text.insert(question.to_owned(), answers.to_vec());
        if let Some(last) = question.chars().next_back() {
            let lengths = self.lengths_by_last.entry(last).or_default();
            // Longest first.
            if let Err(at) = lengths.binary_search_by(|l| question.len().cmp(l)) {
                lengths.insert(at, question.len());
            }
        }
    }

    /// The question with this id: its text and gold answers.
    pub fn by_id(&self, id: &str) -> Option<(&str, &[String])> {
        self.by_id
            .get(id)
            .map(|(text, answers)| (text.as_str(), answers.as_slice()))
    }

    /// The gold answers of the question with this text.
    pub fn by_text(&self, question: &str) -> Option<&[String]> {
        self.by_text.get(question).map(Vec::as_slice)
    }

    /// The dataset question a prompt asks: the prompt itself (trimmed), or what follows its
    /// last `Question:`, when that is a question of the dataset; else the question occurring
    /// in the prompt that ends last (a prompt ends with its question, few-shot examples come
    /// before it), the longest of those ending there. Linear in the prompt for a dataset whose
    /// questions end in a few distinct characters (a hash lookup per question length at each
    /// position holding a question's last character).
    pub fn asked_in<'a>(&'a self, prompt: &str) -> Option<&'a str> {
        let tail = prompt.rsplit("Question:").next().unwrap_or(prompt);
        for candidate in [prompt, prompt.trim(), tail.trim()] {
            if let Some((text, _)) = self.by_text.get_key_value(candidate) {
                return Some(text);
            }
        }
        for (at, last) in prompt.char_indices().rev() {
            let Some(lengths) = self.lengths_by_last.get(&last) else {
                continue;
            };
            let end = at + last.len_utf8();
            for &len in lengths {
                let Some(start) = end.checked_sub(len) else {
                    continue;
                };
                if let Some((text, _)) = prompt
                    .get(start..end)
                    .and_then(|s| self.by_text.get_key_value(s))
                {
                    return Some(text);
                }
            }
        }
        None
    }
}

/// Audits a log's text (JSONL, the shapes of the module's documentation), the gold answers of
/// lines without them looked up in the `rulegym generate` dataset at `dataset` when given:
/// what `rulegym reward-check --audit` and `rulegym.testing.audit_rewards` run.
pub fn audit_log(
    text: &str,
    dataset: Option<&std::path::Path>,
    tolerance: f64,
) -> crate::Result<AuditReport> {
    if tolerance.is_nan() || tolerance < 0.0 {
        return Err(crate::Error::Config(format!(
            "tolerance {tolerance} is not a non-negative number"
        )));
    }
    let gold = match dataset {
        Some(dir) => GoldLookup::new(&crate::dataset::load_questions(dir)?),
        None => GoldLookup::default(),
    };
    let (rollouts, errors) = read_log(text, &gold);
    Ok(audit(&rollouts, errors, tolerance))
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
    let prompt = text(&["prompt", "input"]).unwrap_or_default();
    let mut question = text(&["question"]).unwrap_or_default().to_owned();
    let answers = match v.get("answers").or_else(|| v.get("gts")) {
        Some(g) if !g.is_null() => gold_answers(g)?,
        _ => match (&id, gold.by_text(&question)) {
            (Some(id), _) => {
                let (text, answers) = gold
                    .by_id(id)
                    .ok_or_else(|| format!("no question with id {id:?} in the dataset"))?;
                question = text.to_owned();
                answers.to_vec()
            }
            (None, Some(answers)) => answers.to_vec(),
            (None, None) if !question.is_empty() => {
                return Err(format!("no question {question:?} in the dataset"));
            }
            (None, None) if prompt.is_empty() => {
                return Err(
                    "no gold answers: give \"answers\" (verl: \"gts\"), an \"id\", a \
                     \"question\" of the dataset or the \"prompt\" that asked it"
                        .into(),
                );
            }
            (None, None) => {
                let asked = gold
                    .asked_in(prompt)
                    .ok_or("no question of the dataset occurs in the prompt")?;
                question = asked.to_owned();
                gold.by_text(asked).unwrap_or_default().to_vec()
            }
        },
    };
    if question.is_empty() {
        question = prompt.to_owned();
    }
    let step = v.get("step").and_then(Value::as_i64);
    Ok(Rollout {
        line,
        id,
        response,
        reward,
        answers,
        question,
        step,
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
    /// The counts of each step, in step order, when the log's lines name their `step`
    /// (absent otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_step: Vec<StepCounts>,
}

/// One training step's share of an audit.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepCounts {
    /// The step.
    pub step: i64,
    /// Rollouts of the step compared.
    pub rollouts: usize,
    /// Its divergent rollouts.
    pub diverge: usize,
    /// Reward paid beyond the exact reward in the step.
    pub overpaid: f64,
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
        by_step: Vec::new(),
    };
    let mut steps: BTreeMap<i64, StepCounts> = BTreeMap::new();
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
        let mut step = r.step.map(|s| {
            steps.entry(s).or_insert_with(|| StepCounts {
                step: s,
                ..StepCounts::default()
            })
        });
        if let Some(step) = step.as_deref_mut() {
            step.rollouts += 1;
        }
        let answer = last_answer([r.response.as_str()]);
        let last = answer
            .as_deref()
            .map_or(0.0, |a| score(a, &r.answers, ScoreMode::Squad).f1);
        if (r.reward - exact).abs() <= tolerance || (r.reward - last).abs() <= tolerance {
            report.agree += 1;
            continue;
        }
        report.diverge += 1;
        let delta = r.reward - exact;
        if let Some(step) = step {
            step.diverge += 1;
            step.overpaid += delta.max(0.0);
        }
        let class = report
            .by_property
            .entry(classify(r, answer.as_deref(), exact).to_owned())
            .or_default();
        class.count += 1;
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
    report.by_step = steps.into_values().collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(questions: &[(&str, &str, &[&str])]) -> GoldLookup {
        let mut gold = GoldLookup::default();
        for (id, q, answers) in questions {
            let answers: Vec<String> = answers.iter().map(|a| a.to_string()).collect();
            gold.insert(id, q, &answers);
        }
        gold
    }

    #[test]
    fn the_question_a_prompt_asks_is_the_one_ending_last_and_longest() {
        let gold = lookup(&[
            ("a", "Who is the mother of Ann?", &["Eve"]),
            ("b", "the mother of Ann?", &["x"]),
            ("c", "Who is the father of Ann?", &["Bob"]),
            ("d", "Wer ist die Mutter von Änne?", &["Eva"]),
        ]);
        // The prompt itself, trimmed; or what follows its last "Question:".
        assert_eq!(
            gold.asked_in(" Who is the father of Ann?\n"),
            Some("Who is the father of Ann?")
        );
        assert_eq!(
            gold.asked_in(
                "Question: Who is the father of Ann?\nQuestion: Who is the mother of Ann? "
            ),
            Some("Who is the mother of Ann?")
        );
        // A few-shot example first, the question last; the longer of two ending together.
        let prompt = "Example: Who is the father of Ann? Answer: Bob.\n\
                      Now answer: Who is the mother of Ann?\nThink first.";
        assert_eq!(gold.asked_in(prompt), Some("Who is the mother of Ann?"));
        // Multi-byte characters around and inside the question.
        assert_eq!(
            gold.asked_in("«Wer ist die Mutter von Änne?» — antworte kurz é"),
            Some("Wer ist die Mutter von Änne?")
        );
        assert_eq!(gold.asked_in("Who is the aunt of Ann?"), None);
        assert_eq!(gold.asked_in(""), None);
    }

    #[test]
    fn a_plain_line_finds_its_gold_by_id_question_or_prompt() {
        let gold = lookup(&[("q1", "Who is the mother of Ann?", &["Eve"])]);
        let log = [
            r#"{"id": "q1", "response": "<answer>Eve</answer>", "reward": 1.0}"#,
            r#"{"question": "Who is the mother of Ann?", "response": "", "reward": 0.0}"#,
            r#"{"prompt": "Be brief. Who is the mother of Ann?", "response": "<answer>Eve</answer>", "reward": 1.0, "step": 2}"#,
            r#"{"prompt": "Who is the uncle of Ann?", "response": "", "reward": 0.0}"#,
            r#"{"id": "q9", "response": "", "reward": 0.0}"#,
            r#"{"response": "", "reward": 0.0}"#,
        ]
        .join("\n");
        let (rollouts, errors) = read_log(&log, &gold);
        assert_eq!(rollouts.len(), 3);
        for r in &rollouts {
            assert_eq!(r.answers, ["Eve"]);
            assert_eq!(r.question, "Who is the mother of Ann?");
        }
        assert_eq!(rollouts[2].step, Some(2));
        let messages: Vec<(usize, &str)> = errors
            .iter()
            .map(|e| (e.line, e.message.as_str()))
            .collect();
        assert_eq!(
            messages[0],
            (4, "no question of the dataset occurs in the prompt")
        );
        assert_eq!(
            messages[1],
            (5, "no question with id \"q9\" in the dataset")
        );
        assert!(messages[2].1.starts_with("no gold answers"), "{messages:?}");
    }

    #[test]
    fn steps_count_their_own_rollouts_divergences_and_overpayment() {
        let gold = lookup(&[("q1", "Who is the mother of Ann?", &["Eve"])]);
        let log = [
            r#"{"id": "q1", "response": "<answer>Eve</answer>", "reward": 1.0, "step": 3}"#,
            r#"{"id": "q1", "response": "Eve", "reward": 0.5, "step": 3}"#,
            r#"{"id": "q1", "response": "<answer>Eve</answer>", "reward": 0.25, "step": 1}"#,
            r#"{"id": "q1", "response": "<answer>Bob</answer>", "reward": 0.0, "step": 1}"#,
        ]
        .join("\n");
        let (rollouts, errors) = read_log(&log, &gold);
        let report = audit(&rollouts, errors, DEFAULT_TOLERANCE);
        let steps: Vec<(i64, usize, usize, f64)> = report
            .by_step
            .iter()
            .map(|s| (s.step, s.rollouts, s.diverge, s.overpaid))
            .collect();
        assert_eq!(steps, [(1, 2, 1, 0.0), (3, 2, 1, 0.5)]);
        assert_eq!((report.rollouts, report.diverge), (4, 2));
        // A log without steps has no per-step counts (and no such field in its JSON).
        let (rollouts, _) = read_log(r#"{"id": "q1", "response": "", "reward": 0.0}"#, &gold);
        let report = audit(&rollouts, Vec::new(), DEFAULT_TOLERANCE);
        assert!(report.by_step.is_empty());
        assert!(
            serde_json::to_value(&report)
                .unwrap()
                .get("by_step")
                .is_none()
        );
    }
}
