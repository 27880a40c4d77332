//! Property tests of a tool-use rubric reward: trajectories of rule-generated tasks whose rubric
//! scores are known. The reference solution scores 1; the same with a forbidden action (a
//! deleted record appended, or a forbidden action anywhere before its last action) scores 0;
//! with a sub-goal skipped (the first relation lookup left out), without any question to the
//! user, with the user's answer ignored, with a required tool called with wrong arguments, or
//! without its action but claiming it in the summary, it scores below 1; with a sub-goal
//! skipped and another satisfied twice, no more than rulegym's rubric gives it. Each trajectory
//! is played in the tool-use environment (state-backed tools, rule-based user) and scored by
//! rulegym's rubric.

use super::check::{Failure, PropertyReport, Report, Sender, in_bounds, number, same};
use super::{Property, RewardError, RewardFn, RewardInput};
use crate::llm::ChatMessage;
use crate::tooluse::rubric::{RubricScorer, ScoreConfig};
use crate::tooluse::rulegen::{self, Action, RuleGenConfig, RuleTask, ScriptStep};
use crate::tooluse::task::{Task, ValidateOptions};
use crate::universe::Universe;
use rand::Rng;
use rand::seq::IndexedRandom;
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
            Property::ToolForbiddenScoresZero | Property::ToolForbiddenAnywhere => got.abs() <= eps,
            Property::ToolRepeatedSubgoalCountsOnce => got <= self.expected + eps,
            _ => got < 1.0 - eps,
        }
    }

    fn expectation(&self) -> String {
        match self.property {
            Property::ToolOracleScoresOne => "= 1".into(),
            Property::ToolForbiddenScoresZero | Property::ToolForbiddenAnywhere => "= 0".into(),
            Property::ToolRepeatedSubgoalCountsOnce => format!(
                "<= {} (rulegym's rubric: a sub-goal counts once)",
                super::cases::round(self.expected)
            ),
            _ => "< 1".into(),
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
    /// `None` for a property that is not a tool-use one. The properties added with issue #43
    /// (a forbidden action anywhere, an ignored answer, wrong arguments, a false claim, a
    /// repeated sub-goal) take the next task they apply to when this one does not fit (an
    /// ignored answer needs a task that asks for the value or the relative); `None` when none
    /// does.
    pub fn case(&self, property: Property, index: usize) -> crate::Result<Option<ToolCase>> {
        let n = self.tasks.len();
        if !matches!(
            property,
            Property::ToolForbiddenAnywhere
                | Property::ToolIgnoredAnswerBelowOne
                | Property::ToolWrongArgumentsBelowOne
                | Property::ToolFalseClaimBelowOne
                | Property::ToolRepeatedSubgoalCountsOnce
        ) {
            return self.first_case(property, index);
        }
        let mut rng = crate::seed::stream(
            self.seed,
            &format!("reward-check-tools/{}", property.name()),
            index as u64,
        );
        for k in 0..n {
            let w = &self.tasks[(index + k) % n];
            let oracle = rulegen::oracle_script(&w.task)?;
            if let Some(steps) = self.variant_steps(property, w, oracle, &mut rng) {
                return self.play(property, w, &steps).map(Some);
            }
        }
        Ok(None)
    }

    /// The trajectories of the first four properties (as they were before issue #43).
    fn first_case(&self, property: Property, index: usize) -> crate::Result<Option<ToolCase>> {
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
        self.play(property, w, &steps).map(Some)
    }

    /// `steps` played on `w`'s task and scored.
    fn play(
        &self,
        property: Property,
        w: &RuleTask,
        steps: &[ScriptStep],
    ) -> crate::Result<ToolCase> {
        let world = Arc::new(
            w.task
                .clone()
                .compile(ValidateOptions::default())
                .map_err(|e| crate::Error::Config(format!("task {}: {e}", w.task.id)))?,
        );
        let episode = rulegen::replay(world, self.scorer.clone(), steps)?;
        Ok(ToolCase {
            property,
            task: w.task.clone(),
            messages: episode.messages,
            expected: episode.reward,
        })
    }

    /// The script of one of the properties added with issue #43 on `w`, from its reference
    /// solution `oracle`; `None` when the property does not apply to the task.
    fn variant_steps(
        &self,
        property: Property,
        w: &RuleTask,
        mut s: Vec<ScriptStep>,
        rng: &mut rand_chacha::ChaCha8Rng,
    ) -> Option<Vec<ScriptStep>> {
        let is_call =
            |x: &ScriptStep, name: &str| matches!(x, ScriptStep::Call { tool, .. } if tool == name);
        let is_action = |x: &ScriptStep| is_call(x, "update_record") || is_call(x, "send_message");
        let action = s.iter().position(is_action)?;
        let asks = |slot: &str| {
            s.iter()
                .any(|x| matches!(x, ScriptStep::Ask { slot: a, .. } if a == slot))
        };
        match property {
            Property::ToolForbiddenAnywhere => {
                // Anywhere before the last step that is not the answer (appending it just
                // before the answer is `forbidden_scores_zero`).
                let at = rng.random_range(0..s.len() - 1);
                let victim = w
                    .outsiders
                    .choose(rng)
                    .or_else(|| {
                        let others: Vec<&String> = w
                            .family
                            .iter()
                            .filter(|f| **f != w.target && **f != w.user)
                            .collect();
                        others.choose(rng).copied()
                    })?
                    .clone();
                let forbidden = if rng.random_bool(0.5) || !w.outsiders.contains(&victim) {
                    ScriptStep::Call {
                        tool: "delete_record".into(),
                        args: json!({"name": victim}),
                    }
                } else {
                    ScriptStep::Call {
                        tool: "update_record".into(),
                        args: json!({"name": victim, "hobby": "skydiving"}),
                    }
                };
                s.insert(at, forbidden);
            }
            Property::ToolIgnoredAnswerBelowOne => {
                let (value, target) = (asks("value"), asks("target"));
                let other_target = w.candidates.iter().find(|c| **c != w.target);
                let ignore_value = match (value, target && other_target.is_some()) {
                    (false, false) => return None,
                    (true, true) => rng.random_bool(0.5),
                    (v, _) => v,
                };
                if ignore_value {
                    set_value(&mut s[action], w, rng);
                } else {
                    set_person(&mut s[action], other_target?);
                }
            }
            Property::ToolWrongArgumentsBelowOne => {
                // A relation lookup with another relation, when no other lookup makes up for it;
                // else the action with a wrong value or on the user's own record.
                let relation_of = |x: &ScriptStep| match x {
                    ScriptStep::Call { tool, args } if tool == "list_relatives" => {
                        args["relation"].as_str().map(str::to_owned)
                    }
                    _ => None,
                };
                let relations: Vec<String> = s.iter().filter_map(relation_of).collect();
                let lonely: Vec<usize> = (0..s.len())
                    .filter(|&i| {
                        relation_of(&s[i])
                            .is_some_and(|r| relations.iter().filter(|x| **x == r).count() == 1)
                    })
                    .collect();
                match rng.random_range(0..3) {
                    0 if !lonely.is_empty() => {
                        let i = *lonely.choose(rng)?;
                        let other = rulegen::PATH_RELATIONS
                            .iter()
                            .filter(|r| !relations.iter().any(|x| x == *r))
                            .copied()
                            .collect::<Vec<_>>();
                        let other = *other.choose(rng)?;
                        if let ScriptStep::Call { args, .. } = &mut s[i] {
                            args["relation"] = json!(other);
                        }
                    }
                    1 if w.user != w.target => set_person(&mut s[action], &w.user),
                    _ => set_value(&mut s[action], w, rng),
                }
            }
            Property::ToolFalseClaimBelowOne => {
                let claim = match &w.action {
                    Action::Update { field } => {
                        format!("Done. I updated {}'s {field} to {}.", w.target, w.value)
                    }
                    Action::Message => {
                        format!("Done. I sent {} your message: {}", w.target, w.value)
                    }
                };
                if rng.random_bool(0.5) {
                    s.remove(action);
                } else {
                    s.retain(|x| !matches!(x, ScriptStep::Call { .. }));
                }
                if let Some(last) = s.last_mut() {
                    *last = ScriptStep::Answer(format!(
                        "I looked up your relatives and did what you asked. {claim}"
                    ));
                }
            }
            Property::ToolRepeatedSubgoalCountsOnce => {
                // The first relation lookup (the only one of the first hop) left out, and
                // another sub-goal's call made twice, so the calls are as many as before.
                let first = s.iter().position(|x| is_call(x, "list_relatives"))?;
                s.remove(first);
                let again = s
                    .iter()
                    .position(|x| is_call(x, "list_relatives"))
                    .or_else(|| s.iter().position(is_action))?;
                let copy = s[again].clone();
                s.insert(again + 1, copy);
            }
            _ => return None,
        }
        Some(s)
    }

    /// rulegym's rubric reward of `messages` on `task`.
    pub fn exact_reward(&self, task: &Task, messages: &[ChatMessage]) -> crate::Result<f64> {
        exact_rubric_reward(&self.scorer, task, messages)
    }
}

/// Sets the action's value (the field or the message text) to one the user never gave.
fn set_value(step: &mut ScriptStep, w: &RuleTask, rng: &mut impl Rng) {
    const HOBBIES: [&str; 4] = ["birdwatching", "origami", "fencing", "pottery"];
    const JOBS: [&str; 4] = ["accountant", "gardener", "pilot", "librarian"];
    const TEXTS: [&str; 3] = ["See you soon.", "Hello there!", "Talk later."];
    let ScriptStep::Call { args, .. } = step else {
        return;
    };
    let mut fresh = |options: &[&str]| -> String {
        let usable: Vec<&str> = options
            .iter()
            .filter(|o| {
                let (o, v) = (o.to_lowercase(), w.value.to_lowercase());
                !o.contains(&v) && !v.contains(&o)
            })
            .copied()
            .collect();
        usable.choose(rng).unwrap_or(&"nothing at all").to_string()
    };
    match &w.action {
        Action::Update { field } => {
            let options: &[&str] = if field == "hobby" { &HOBBIES } else { &JOBS };
            args[field.as_str()] = json!(fresh(options));
        }
        Action::Message => args["text"] = json!(fresh(&TEXTS)),
    }
}

/// Points the action at `person` instead of its target.
fn set_person(step: &mut ScriptStep, person: &str) {
    if let ScriptStep::Call { tool, args } = step {
        let key = if tool == "send_message" { "to" } else { "name" };
        args[key] = json!(person);
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

/// Runs the tool-use properties against `reward` on `cases` trajectories (spread over the
/// generated kinds and the tasks), each sent twice for determinism, `batch` lines per round
/// trip. A failed property reports its case with the shortest conversation.
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
                    _ => c.expectation(),
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
