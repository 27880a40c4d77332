//! Property tests of a tool-use rubric reward: trajectories of rule-generated tasks whose rubric
//! scores are known. The reference solution scores 1; the same with a forbidden action (a
//! deleted record) scores 0; with a sub-goal skipped (the first relation lookup left out) or
//! without any question to the user, it scores below 1. Each trajectory is played in the
//! tool-use environment (state-backed tools, rule-based user) and scored by rulegym's rubric.

use super::check::{Failure, PropertyReport, Report, Sender, in_bounds, number, same};
use super::{Property, RewardError, RewardFn, RewardInput};
use crate::llm::ChatMessage;
use crate::tooluse::rubric::{RubricScorer, ScoreConfig};
use crate::tooluse::rulegen::{self, RuleGenConfig, RuleTask, ScriptStep};
use crate::tooluse::task::{Task, ValidateOptions};
use crate::universe::Universe;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One trajectory with its known rubric score.
#[derive(Debug, Clone)]
pub struct ToolCase {
    /// The property it tests.
    pub property: Property,
    /// The task.
    pub task: Task,
    /// The conversation (OpenAI messages, as the environment recorded it).
    pub messages: Vec<ChatMessage>,
    /// rulegym's rubric reward for it.
    pub expected: f64,
}

impl ToolCase {
    /// The reward function's input: `{"id", "task", "messages"}`.
    pub fn input(&self, id: String) -> RewardInput {
        let mut fields = serde_json::Map::new();
        fields.insert("task".into(), json!(self.task));
        fields.insert("messages".into(), json!(self.messages));
        RewardInput { id, fields }
    }

    /// Whether a reward `got` satisfies the case's property.
    pub fn holds(&self, got: f64) -> bool {
        let eps = super::cases::EPS;
        match self.property {
            Property::ToolOracleScoresOne => (got - 1.0).abs() <= eps,
            Property::ToolForbiddenScoresZero => got.abs() <= eps,
            _ => got < 1.0 - eps,
        }
    }

    fn expectation(&self) -> &'static str {
        match self.property {
            Property::ToolOracleScoresOne => "= 1",
            Property::ToolForbiddenScoresZero => "= 0",
            _ => "< 1",
        }
    }
}

/// Rule-generated tasks of a universe, and the scorer that knows their rubric scores.
pub struct ToolCaseSource {
    seed: u64,
    tasks: Vec<RuleTask>,
    scorer: Arc<RubricScorer>,
}

impl ToolCaseSource {
    /// `count` rule-generated tasks of `universe` (task stream `seed`).
    pub fn new(universe: &Universe, seed: u64, count: usize) -> crate::Result<Self> {
        let config = RuleGenConfig {
            seed,
            ..RuleGenConfig::default()
        };
        let tasks = rulegen::generate(universe, &config, count).map_err(|e| {
            crate::Error::Config(format!("generating tool-use tasks for reward-check: {e}"))
        })?;
        if tasks.is_empty() {
            return Err(crate::Error::Config(
                "the universe yields no rule-generated tool-use task".into(),
            ));
        }
        Ok(ToolCaseSource {
            seed,
            tasks,
            scorer: Arc::new(RubricScorer::new(ScoreConfig::default())?),
        })
    }

    /// Tasks of a fresh universe from `seed` with `trees` family trees.
    pub fn generate(seed: u64, trees: usize, count: usize) -> crate::Result<Self> {
        let universe = Universe::generate(&crate::universe::UniverseConfig {
            seed,
            num_family_trees: trees,
            ..Default::default()
        })?;
        Self::new(&universe, seed, count)
    }

    /// The tasks.
    pub fn tasks(&self) -> &[RuleTask] {
        &self.tasks
    }

    /// The trajectory of `property` on task `index % tasks` (deterministic), played and scored;
    /// `None` for a property that is not a tool-use one.
    pub fn case(&self, property: Property, index: usize) -> crate::Result<Option<ToolCase>> {
        let w = &self.tasks[index % self.tasks.len()];
        let oracle = rulegen::oracle_script(&w.task)?;
        let is_call =
            |s: &ScriptStep, name: &str| matches!(s, ScriptStep::Call { tool, .. } if tool == name);
        let steps: Vec<ScriptStep> = match property {
            Property::ToolOracleScoresOne => oracle,
            Property::ToolForbiddenScoresZero => {
                let mut s = oracle;
                let at = s.len() - 1;
                s.insert(
                    at,
                    ScriptStep::Call {
                        tool: "delete_record".into(),
                        args: json!({"name": w.target}),
                    },
                );
                s
            }
            Property::ToolSkippedSubgoalBelowOne => {
                let mut s = oracle;
                match s.iter().position(|x| is_call(x, "list_relatives")) {
                    Some(i) => {
                        s.remove(i);
                    }
                    None => return Ok(None),
                }
                s
            }
            Property::ToolNoQuestionBelowOne => oracle
                .into_iter()
                .filter(|x| !matches!(x, ScriptStep::Ask { .. }))
                .collect(),
            _ => return Ok(None),
        };
        let world = Arc::new(
            w.task
                .clone()
                .compile(ValidateOptions::default())
                .map_err(|e| crate::Error::Config(format!("task {}: {e}", w.task.id)))?,
        );
        let episode = rulegen::replay(world, self.scorer.clone(), &steps)?;
        Ok(Some(ToolCase {
            property,
            task: w.task.clone(),
            messages: episode.messages,
            expected: episode.reward,
        }))
    }

    /// rulegym's rubric reward of `messages` on `task`.
    pub fn exact_reward(&self, task: &Task, messages: &[ChatMessage]) -> crate::Result<f64> {
        exact_rubric_reward(&self.scorer, task, messages)
    }
}

/// rulegym's rubric reward of a conversation on `task` (the facts rebuilt from the messages,
/// as `rulegym tools score` does).
pub fn exact_rubric_reward(
    scorer: &RubricScorer,
    task: &Task,
    messages: &[ChatMessage],
) -> crate::Result<f64> {
    let world = Arc::new(task.clone().compile(ValidateOptions::default())?);
    let trajectory = crate::tooluse::env::trajectory_from_messages(&world, messages)?;
    Ok(scorer.score(&world.program, &trajectory, None)?.reward)
}

/// Runs the tool-use properties against `reward` on `cases` trajectories (spread over the four
/// kinds and the tasks), each sent twice for determinism, `batch` lines per round trip. A failed property reports its case
/// with the shortest conversation.
pub fn check_tools(
    source: &ToolCaseSource,
    reward: &mut dyn RewardFn,
    cases: usize,
    batch: usize,
) -> crate::Result<Result<Report, RewardError>> {
    if !(1..=super::check::MAX_CASES).contains(&cases) {
        return Err(crate::Error::Config(format!(
            "cases must be in 1..={}, got {cases}",
            super::check::MAX_CASES
        )));
    }
    let kinds = Property::TOOL_GENERATED;
    let mut built = Vec::new();
    let mut tried: BTreeMap<Property, usize> = BTreeMap::new();
    for i in 0..cases {
        let p = kinds[i % kinds.len()];
        tried.entry(p).or_default();
        if let Some(c) = source.case(p, i / kinds.len())? {
            *tried.entry(p).or_default() += 1;
            built.push(c);
        }
    }
    let mut inputs: Vec<RewardInput> = built
        .iter()
        .enumerate()
        .map(|(i, c)| c.input(i.to_string()))
        .collect();
    inputs.extend(
        built
            .iter()
            .enumerate()
            .map(|(i, c)| c.input(format!("{i}d"))),
    );
    let mut failed: BTreeMap<Property, usize> = BTreeMap::new();
    let mut worst: BTreeMap<Property, (usize, f64, Option<f64>)> = BTreeMap::new();
    let mut note = |p: Property, case: usize, got: f64, other: Option<f64>| {
        *failed.entry(p).or_default() += 1;
        let shorter = worst
            .get(&p)
            .is_none_or(|&(c, _, _)| built[case].messages.len() < built[c].messages.len());
        if shorter {
            worst.insert(p, (case, got, other));
        }
    };
    let mut sender = Sender { reward, lines: 0 };
    let mut got = Vec::with_capacity(inputs.len());
    let mut stopped = None;
    for chunk in inputs.chunks(batch.max(1)) {
        match sender.send(chunk) {
            Ok(g) => got.extend(g),
            Err(RewardError::Timeout { line, id, secs }) => {
                stopped = Some((line, id, secs));
                break;
            }
            Err(e) => return Ok(Err(e)),
        }
    }
    if got.len() < inputs.len() {
        got.clear();
    }
    if !got.is_empty() {
        for (i, c) in built.iter().enumerate() {
            let (main, dup) = (got[i], got[built.len() + i]);
            for v in [main, dup] {
                if !in_bounds(v) {
                    note(Property::Bounded, i, v, None);
                }
            }
            if !same(main, dup) {
                note(Property::Deterministic, i, main, Some(dup));
            }
            if !c.holds(main) {
                note(c.property, i, main, None);
            }
        }
    }
    let mut failures: Vec<Failure> = worst
        .iter()
        .map(|(&p, &(case, got, other))| {
            let c = &built[case];
            Failure {
                property: p.name(),
                input: serde_json::Value::Object(c.input(String::new()).fields),
                expected: match p {
                    Property::Bounded => "in [0, 1]".to_owned(),
                    Property::Deterministic => {
                        format!("= {got} (the first answer to the same line)")
                    }
                    _ => c.expectation().to_owned(),
                },
                got: number(if p == Property::Deterministic {
                    other.unwrap_or(f64::NAN)
                } else {
                    got
                }),
                base_got: None,
                rulegym: Some(c.expected),
            }
        })
        .collect();
    if let Some((line, id, secs)) = &stopped {
        failed.insert(Property::Timely, 1);
        failures.push(Failure::timely(*line, id, *secs));
    }
    let properties = Property::TOOL_REPORT
        .iter()
        .map(|&p| PropertyReport {
            property: p.name(),
            description: p.description(),
            tried: match p {
                Property::Bounded | Property::Timely => got.len(),
                Property::Deterministic => got.len() / 2,
                _ => tried.get(&p).copied().unwrap_or(0),
            },
            failed: failed.get(&p).copied().unwrap_or(0),
        })
        .collect();
    Ok(Ok(Report {
        passed: failures.is_empty() && failed.values().all(|&n| n == 0),
        seed: source.seed,
        questions: source.tasks.len(),
        cases: built.len(),
        lines: inputs.len(),
        stopped_early: stopped.is_some(),
        properties,
        failures,
    }))
}
