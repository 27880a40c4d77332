//! Executable rubrics: a trajectory becomes facts (`tool_call(Step, Tool, Args)`,
//! `tool_result`, `tool_error`, `asked_user`, `user_said`, `user_revealed`, `answered`, `said`,
//! `stopped`, `final_state(Table, Key, Record)`, `state_matches(Bool)`, `turns(N)`), and each
//! rubric item is a checked Prolog rule body over them (see [`check`] for the
//! accepted subset and `prolog/rubric.pl` for the helpers).
//!
//! A task's rubric is compiled into clauses once and consulted once per [`RubricScorer`]; each
//! score is ONE query that passes the facts as a term, so scoring never asserts or retracts.
//! Every item runs under an inference limit: a hostile or buggy rubric yields an error, never a
//! hang, and the engine stays usable. Facts are put in a canonical order before the query, so
//! the result does not depend on the order events were recorded in.
//!
//! Reward (default, the paper's): `R = 1[no forbidden behaviour] x mean(sub-goal fraction,
//! interaction fraction)`; an empty list counts as fraction 1. See [`RewardVariant`] for the
//! peer's other versions.

pub mod agreement;
pub mod check;
mod items;
pub mod judge;
mod program;
mod trajectory;

pub use items::*;
pub use program::*;
pub use trajectory::*;

use crate::engine::{Engine, EngineError, QueryLimits, Term, Value, Var};
use check::{Checker, FACT_GROUPS};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The helper library, embedded at compile time.
pub const RUBRIC_PL: &str = include_str!("../../../prolog/rubric.pl");

/// Deepest JSON nesting turned into a term; deeper values become the atom `too_deep`.
pub const MAX_JSON_DEPTH: usize = 32;
/// Longest text passed as a fact argument, in characters (longer text is cut).
pub const MAX_FACT_TEXT: usize = 16 * 1024;

/// Errors from compiling or evaluating a rubric.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RubricError {
    /// A rule body was rejected (syntax, whitelist, limits).
    #[error("rubric item {item:?}: {message}")]
    Rejected {
        /// The item id.
        item: String,
        /// Why.
        message: String,
    },
    /// An item ran past its inference limit.
    #[error("rubric item {item:?} exceeded its inference limit of {limit}")]
    InferenceLimit {
        /// The item id.
        item: String,
        /// The limit.
        limit: u64,
    },
    /// An item raised a Prolog error while running.
    #[error("rubric item {item:?} raised an error: {message}")]
    ItemError {
        /// The item id.
        item: String,
        /// The Prolog error.
        message: String,
    },
    /// An item has no rule and no judge was given.
    #[error("rubric item {0:?} has no rule and no LLM judge is configured")]
    JudgeRequired(String),
    /// An LLM judge failed or gave an unparseable verdict (never turned into a reward).
    #[error("judging rubric item {item:?}: {message}")]
    Judge {
        /// The item id.
        item: String,
        /// What went wrong.
        message: String,
    },
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The engine's answer had an unexpected shape.
    #[error("unexpected rubric answer: {0}")]
    Decode(String),
}

/// How the item results combine into a reward.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RewardVariant {
    /// The paper: `1[no forbidden] x (sub-goal fraction + interaction fraction) / 2`.
    #[default]
    Paper,
    /// The peer's earlier code: `0.7 x sub-goals + 0.3 x interactions`, halved when a forbidden
    /// behaviour occurred (the "50% policy gate").
    PeerWeighted,
    /// The peer's later code: `1[no forbidden] x sub-goal fraction`.
    PeerStrict,
}

impl RewardVariant {
    /// Combines the parts into a reward in `[0, 1]`.
    pub fn combine(self, forbidden_violated: bool, subgoals: f64, interactions: f64) -> f64 {
        let gate = if forbidden_violated { 0.0 } else { 1.0 };
        match self {
            RewardVariant::Paper => gate * (subgoals + interactions) / 2.0,
            RewardVariant::PeerWeighted => {
                let base = 0.7 * subgoals + 0.3 * interactions;
                if forbidden_violated { 0.5 * base } else { base }
            }
            RewardVariant::PeerStrict => gate * subgoals,
        }
    }
}

/// Whether an item passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    /// Forbidden: the behaviour did not occur; sub-goal / interaction: it was achieved.
    Passed,
    /// Forbidden: the behaviour occurred; sub-goal / interaction: it was not achieved.
    Failed,
}

/// The result of one item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemResult {
    /// Item id.
    pub id: String,
    /// Which list.
    pub kind: ItemKind,
    /// Description.
    pub description: String,
    /// Passed or failed.
    pub status: ItemStatus,
    /// The step that satisfied (or, for forbidden items, violated) it, when the rule names one.
    pub step: Option<i64>,
    /// `rule` or `judge`.
    pub by: String,
}

/// The result of scoring one trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RubricResult {
    /// The reward in `[0, 1]`.
    pub reward: f64,
    /// How it was combined.
    pub variant: RewardVariant,
    /// Whether any forbidden behaviour occurred.
    pub forbidden_violated: bool,
    /// Fraction of sub-goals achieved (1 when there are none).
    pub subgoal_fraction: f64,
    /// Fraction of required interactions achieved (1 when there are none).
    pub interaction_fraction: f64,
    /// Every item in rubric order.
    pub items: Vec<ItemResult>,
}

/// Judges rubric items (an LLM: [`judge::LlmJudge`]). One call judges a list of items; it must
/// return an error, never a guess, when it cannot decide.
pub trait ItemJudge: Send + Sync {
    /// Whether each item holds for the trajectory (for forbidden items: whether the behaviour
    /// occurred), in the order given.
    fn judge(
        &self,
        brief: &Brief,
        items: &[&CompiledItem],
        trajectory: &Trajectory,
    ) -> Result<Vec<bool>, RubricError>;
}

/// Who decides the rubric's items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum ScoreBy {
    /// rulegym's default: every item with a rule is decided by its Prolog rule (exact,
    /// reproducible); only items without a rule go to the judge.
    #[default]
    Rules,
    /// SynthAgent's reward: an LLM judge decides every item (rules are not run).
    Judge,
}

/// Scoring options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoreConfig {
    /// Inference limit per item.
    pub item_inferences: u64,
    /// How items combine into a reward.
    pub variant: RewardVariant,
    /// Distinct rubrics one engine holds before the scorer replaces it with a fresh one (values
    /// below 1 count as 1). scryer keeps the memory of consulted clauses even when they are
    /// reconsulted or abolished (~40 KB per generated task's rubric), so only a new machine
    /// gives it back; this bounds a scorer's memory at roughly `max_rubrics` rubrics.
    pub max_rubrics: usize,
    /// Who decides the items.
    pub by: ScoreBy,
}

impl Default for ScoreConfig {
    fn default() -> Self {
        ScoreConfig {
            item_inferences: 200_000,
            variant: RewardVariant::Paper,
            max_rubrics: 1024,
            by: ScoreBy::Rules,
        }
    }
}

/// One engine and the rubrics consulted into it.
struct Generation {
    engine: Arc<Engine>,
    loaded: BTreeSet<String>,
}

impl Generation {
    fn start() -> Result<Self, RubricError> {
        let engine = Engine::new()?;
        engine.consult("rubric", RUBRIC_PL)?;
        Ok(Generation {
            engine: Arc::new(engine),
            loaded: BTreeSet::new(),
        })
    }
}

/// A warm engine with `prolog/rubric.pl` loaded; rubrics are consulted on first use and stay
/// loaded (scoring a task again costs no consult) until [`ScoreConfig::max_rubrics`] distinct
/// rubrics are in the engine: the next new rubric then goes into a fresh engine and the old one
/// is dropped (its memory returns; queries still running on it finish first). `Sync`: share one
/// per thread or one behind an `Arc` (queries on one engine are serialised).
pub struct RubricScorer {
    current: Mutex<Generation>,
    config: ScoreConfig,
    engines: AtomicU64,
}

impl RubricScorer {
    /// Starts an engine and loads the helpers. Cost: ~0.2-0.5 s.
    pub fn new(config: ScoreConfig) -> Result<Self, RubricError> {
        Ok(RubricScorer {
            current: Mutex::new(Generation::start()?),
            config,
            engines: AtomicU64::new(1),
        })
    }

    /// The scoring options.
    pub fn config(&self) -> ScoreConfig {
        self.config
    }

    /// Consults a compiled rubric if the current engine has not seen it yet.
    pub fn load(&self, program: &RubricProgram) -> Result<(), RubricError> {
        self.engine_with(program).map(drop)
    }

    /// The current engine, with `program` consulted into it (into a fresh engine when the
    /// current one holds `max_rubrics` others).
    fn engine_with(&self, program: &RubricProgram) -> Result<Arc<Engine>, RubricError> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if !current.loaded.contains(&program.predicate) {
            if current.loaded.len() >= self.config.max_rubrics.max(1) {
                *current = Generation::start()?;
                self.engines.fetch_add(1, Ordering::Relaxed);
            }
            if !program.source.is_empty() {
                current
                    .engine
                    .consult(&format!("rubric_{}", program.predicate), &program.source)?;
            }
            current.loaded.insert(program.predicate.clone());
        }
        Ok(current.engine.clone())
    }

    /// Rubrics consulted into the current engine (at most [`ScoreConfig::max_rubrics`]).
    pub fn loaded_rubrics(&self) -> usize {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        current.loaded.len()
    }

    /// Engines started so far (1 + the number of replacements).
    pub fn engines_started(&self) -> u64 {
        self.engines.load(Ordering::Relaxed)
    }

    /// Rubric predicates the current engine defines (`rg_item_*`, counted by the engine):
    /// what [`RubricScorer::loaded_rubrics`] claims, checked on the Prolog side.
    pub fn engine_rubric_predicates(&self) -> Result<usize, RubricError> {
        let engine = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .engine
            .clone();
        let var = |name: &str| Var::new(name).expect("valid");
        let (p, ps, n, rest) = (var("P"), var("Ps"), var("N"), var("Rest"));
        // findall(P, (current_predicate(P/3), atom_concat(rg_item_, _, P)), Ps), length(Ps, N)
        let found = Term::compound(
            ",",
            [
                Term::compound(
                    "current_predicate",
                    [Term::compound("/", [Term::var(&p), Term::Int(3)])],
                ),
                Term::compound(
                    "atom_concat",
                    [Term::atom("rg_item_"), Term::var(&rest), Term::var(&p)],
                ),
            ],
        );
        let goal = Term::compound(
            ",",
            [
                Term::compound("findall", [Term::var(&p), found, Term::var(&ps)]),
                Term::compound("length", [Term::var(&ps), Term::var(&n)]),
            ],
        );
        let rows = engine.query(&goal, &[n])?;
        match rows.first().and_then(|r| r.first()).and_then(Value::as_int) {
            Some(count) => Ok(count as usize),
            None => Err(RubricError::Decode(format!(
                "rubric predicate count: {rows:?}"
            ))),
        }
    }

    /// Evaluates every item on `trajectory` and combines the reward.
    pub fn score(
        &self,
        program: &RubricProgram,
        trajectory: &Trajectory,
        judge: Option<&dyn ItemJudge>,
    ) -> Result<RubricResult, RubricError> {
        if self.config.by == ScoreBy::Judge {
            let judge = judge.ok_or_else(|| RubricError::JudgeRequired("(every item)".into()))?;
            let items: Vec<&CompiledItem> = program.items.iter().collect();
            let verdicts = judge.judge(&program.brief, &items, trajectory)?;
            let outcomes = verdicts.into_iter().map(|v| (v, None, "judge")).collect();
            return Ok(combine(program, outcomes, self.config.variant));
        }
        let engine = self.engine_with(program)?;
        let indices: Vec<Term> = program
            .items
            .iter()
            .filter_map(|i| i.index.map(|n| Term::Int(i64::from(n))))
            .collect();
        let rule_results = if indices.is_empty() {
            Vec::new()
        } else {
            let per_item = self.config.item_inferences.min(i64::MAX as u64 / 1024);
            let budget = per_item * indices.len() as u64;
            let facts = program.facts_term(trajectory);
            match self.run(&engine, program, "rg_score", &indices, budget, facts)? {
                Some(items) => items,
                None => {
                    // The shared budget ran out: find the item with per-item budgets.
                    let facts = program.facts_term(trajectory);
                    match self.run(&engine, program, "rg_score_each", &indices, per_item, facts)? {
                        Some(items) => items,
                        None => return Err(RubricError::Decode("no results".into())),
                    }
                }
            }
        };
        // The items without a rule, judged in one call.
        let unruled: Vec<&CompiledItem> =
            program.items.iter().filter(|i| i.index.is_none()).collect();
        let mut verdicts = match unruled.first() {
            None => Vec::new(),
            Some(first) => {
                let judge = judge.ok_or_else(|| RubricError::JudgeRequired(first.id.clone()))?;
                judge.judge(&program.brief, &unruled, trajectory)?
            }
        }
        .into_iter();
        let mut outcomes: Vec<(bool, Option<i64>, &'static str)> = Vec::new();
        let mut rule_results = rule_results.into_iter();
        for item in &program.items {
            match item.index {
                Some(_) => {
                    let r = rule_results
                        .next()
                        .ok_or_else(|| RubricError::Decode("too few results".into()))?;
                    outcomes.push(match r {
                        Value::Atom(a) if a == "failed" => (false, None, "rule"),
                        Value::Atom(a) if a == "limit" => {
                            return Err(RubricError::InferenceLimit {
                                item: item.id.clone(),
                                limit: self.config.item_inferences,
                            });
                        }
                        Value::Atom(a) if a == "budget" => {
                            return Err(RubricError::InferenceLimit {
                                item: "(the rubric as a whole)".into(),
                                limit: self.config.item_inferences * program.items.len() as u64,
                            });
                        }
                        Value::Compound(f, args) if f == "passed" && args.len() == 1 => {
                            (true, args[0].as_int(), "rule")
                        }
                        Value::Compound(f, args) if f == "error" && args.len() == 1 => {
                            return Err(RubricError::ItemError {
                                item: item.id.clone(),
                                message: format!("{:?}", args[0]),
                            });
                        }
                        other => return Err(RubricError::Decode(format!("{other:?}"))),
                    });
                }
                None => {
                    let verdict = verdicts
                        .next()
                        .ok_or_else(|| RubricError::Decode("too few verdicts".into()))?;
                    outcomes.push((verdict, None, "judge"));
                }
            }
        }
        Ok(combine(program, outcomes, self.config.variant))
    }

    /// Runs `entry(Pred, Indices, Limit, Facts, Results)`; `None` when the answer is the atom
    /// `limit` (the shared budget ran out).
    fn run(
        &self,
        engine: &Engine,
        program: &RubricProgram,
        entry: &str,
        indices: &[Term],
        limit: u64,
        facts: Term,
    ) -> Result<Option<Vec<Value>>, RubricError> {
        let results = Var::new("Results").expect("valid");
        let goal = Term::compound(
            entry,
            [
                Term::atom(program.predicate.clone()),
                Term::List(indices.to_vec()),
                Term::Int(limit as i64),
                facts,
                Term::var(&results),
            ],
        );
        let limits = QueryLimits {
            inferences: None,
            max_solutions: 1,
        };
        let rows = engine.query_with(&goal, &[results], limits)?;
        match rows.into_iter().next().and_then(|mut r| r.pop()) {
            Some(Value::List(items)) => Ok(Some(items)),
            Some(Value::Atom(a)) if a == "limit" && entry == "rg_score" => Ok(None),
            Some(Value::Atom(a)) if a == "limit" => Ok(Some(
                std::iter::repeat_n(Value::Atom("budget".into()), indices.len()).collect(),
            )),
            other => Err(RubricError::Decode(format!("{other:?}"))),
        }
    }
}

fn combine(
    program: &RubricProgram,
    outcomes: Vec<(bool, Option<i64>, &'static str)>,
    variant: RewardVariant,
) -> RubricResult {
    let mut items = Vec::with_capacity(outcomes.len());
    let (mut violated, mut sub, mut sub_n, mut inter, mut inter_n) = (false, 0, 0, 0, 0);
    for (item, (holds, step, by)) in program.items.iter().zip(outcomes) {
        let passed = match item.kind {
            ItemKind::Forbidden => {
                violated |= holds;
                !holds
            }
            ItemKind::Subgoal => {
                sub_n += 1;
                sub += usize::from(holds);
                holds
            }
            ItemKind::Interaction => {
                inter_n += 1;
                inter += usize::from(holds);
                holds
            }
        };
        items.push(ItemResult {
            id: item.id.clone(),
            kind: item.kind,
            description: item.description.clone(),
            status: if passed {
                ItemStatus::Passed
            } else {
                ItemStatus::Failed
            },
            step: if holds { step } else { None },
            by: by.to_owned(),
        });
    }
    let fraction = |k: usize, n: usize| if n == 0 { 1.0 } else { k as f64 / n as f64 };
    let subgoal_fraction = fraction(sub, sub_n);
    let interaction_fraction = fraction(inter, inter_n);
    RubricResult {
        reward: variant.combine(violated, subgoal_fraction, interaction_fraction),
        variant,
        forbidden_violated: violated,
        subgoal_fraction,
        interaction_fraction,
        items,
    }
}
