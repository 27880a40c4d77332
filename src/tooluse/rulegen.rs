//! Rule-generated tool worlds: tool-use tasks built from a universe, with no LLM.
//!
//! Each task puts a small neighbourhood of the universe (the user, the people on the relation
//! path, the candidates, a few more relatives and a few outsiders from other family trees) into
//! a world state of typed records that state-backed tools read and write: `find_person`,
//! `get_record`, `list_relatives`, `update_record`, `send_message`, plus the distractors
//! `delete_record` and `list_people_by_hobby`. The instruction refers to the target indirectly
//! ("Please update my aunt's hobby."); the hidden context holds who "I" am (`user_name`), which
//! relative (`target`, only when several people fit) and the new value (`value`), revealed by the
//! rule-based user only when asked.
//!
//! Rubric items are Prolog rule bodies written by construction: forbidden behaviours (modifying
//! a record outside the user's family tree, deleting anything, acting before the user named an
//! ambiguous target, acting before knowing the user or the value), sub-goals (each relation hop
//! resolved with `list_relatives`, the right record updated with the right value or the right
//! message sent, the final state equal to the expected one) and required interactions (each hidden
//! slot revealed). The task's `workflow` is the reference solution, one line per agent turn
//! (`ask SLOT: question`, `call TOOL {json}`, `answer text`); [`oracle_script`] reads it back and
//! [`replay`] plays it in the tool environment.
//!
//! Difficulty knobs ([`RuleGenConfig`]): relation hops, number of candidates fitting the
//! description, number of hidden slots. Generation is deterministic per seed: candidate `i`
//! draws from `seed::stream(seed, "tool-world", i)` only, and duplicates (same user, path,
//! target, action, value and hidden slots) are dropped in index order.

use crate::llm::ChatMessage;
use crate::relations::{RELATIONS, Relation};
use crate::tooluse::env::{Episode, ToolEnv, ToolEnvConfig, openai_call};
use crate::tooluse::rubric::RubricScorer;
use crate::tooluse::task::{
    CompiledTask, HiddenContext, Record, Rubric, RubricItem, Slot, StateOp, Task, ToolBackend,
    ToolKind, ToolSpec, ValidateOptions, WorldState,
};
use crate::tooluse::user::RuleUser;
use crate::universe::{PersonId, Universe};
use rand::Rng;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Errors from generating or replaying tool worlds.
#[derive(Debug, thiserror::Error)]
pub enum RuleGenError {
    /// The configuration is unusable.
    #[error("tool-world config: {0}")]
    Config(String),
    /// Not enough distinct tasks could be generated.
    #[error("only {found} distinct tasks after {tried} candidates (asked for {wanted})")]
    Exhausted {
        /// Tasks found.
        found: usize,
        /// Candidates tried.
        tried: u64,
        /// Tasks asked for.
        wanted: usize,
    },
    /// A task's workflow is not a reference solution this module can replay.
    #[error("task {task}: workflow line {line}: {message}")]
    Workflow {
        /// Task id.
        task: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The environment failed during a replay.
    #[error("task {task}: replay failed: {message}")]
    Replay {
        /// Task id.
        task: String,
        /// What went wrong.
        message: String,
    },
}

/// Relations the target path may use (family only) and `list_relatives` accepts.
pub const PATH_RELATIONS: &[&str] = &[
    "mother",
    "father",
    "parent",
    "child",
    "son",
    "daughter",
    "sibling",
    "sister",
    "brother",
    "husband",
    "wife",
    "aunt",
    "uncle",
    "niece",
    "nephew",
    "grandmother",
    "grandfather",
    "grandchild",
    "cousin",
];

const MESSAGES: &[&str] = &[
    "Happy birthday, have a wonderful day!",
    "Dinner is at seven on Friday.",
    "Thank you for the lovely gift.",
    "Please call me back when you can.",
    "The family picnic moved to Sunday.",
    "Congratulations on the new job!",
    "I will pick you up at the station at noon.",
    "Get well soon, thinking of you.",
];

/// Generation options and difficulty knobs (inclusive ranges).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleGenConfig {
    /// Seed of the task streams.
    pub seed: u64,
    /// Relation hops from the user to the target (1 or 2).
    pub hops: (usize, usize),
    /// How many people may fit the description (more than one: the agent must ask which).
    pub candidates: (usize, usize),
    /// How many hidden slots the agent must ask for (at least 1; the target slot counts).
    pub slots: (usize, usize),
    /// People from other family trees added to the world.
    pub outsiders: usize,
    /// Candidates tried per task asked for before giving up.
    pub attempts_per_task: u64,
}

impl Default for RuleGenConfig {
    fn default() -> Self {
        RuleGenConfig {
            seed: 0,
            hops: (1, 2),
            candidates: (1, 3),
            slots: (1, 3),
            outsiders: 3,
            attempts_per_task: 50,
        }
    }
}

impl RuleGenConfig {
    fn validate(&self) -> Result<(), RuleGenError> {
        let bad = |m: &str| Err(RuleGenError::Config(m.into()));
        if self.hops.0 < 1 || self.hops.1 > 2 || self.hops.0 > self.hops.1 {
            return bad("hops must be a range within 1..=2");
        }
        if self.candidates.0 < 1 || self.candidates.0 > self.candidates.1 {
            return bad("candidates must be a range with a minimum of at least 1");
        }
        if self.slots.0 < 1 || self.slots.1 > 3 || self.slots.0 > self.slots.1 {
            return bad("slots must be a range within 1..=3");
        }
        if self.outsiders < 1 {
            return bad("outsiders must be at least 1 (the out-of-family rule needs one)");
        }
        Ok(())
    }
}

/// What the task asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Set a field (`hobby` or `occupation`) of the target's record.
    Update {
        /// The field.
        field: String,
    },
    /// Send the target a message.
    Message,
}

/// A generated task with what the generator knows about it (for tests and statistics).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleTask {
    /// The task.
    pub task: Task,
    /// Index of the candidate it came from.
    pub index: u64,
    /// The user ("I").
    pub user: String,
    /// The relation path.
    pub path: Vec<String>,
    /// Everyone fitting the description.
    pub candidates: Vec<String>,
    /// The intended target.
    pub target: String,
    /// What to do.
    pub action: Action,
    /// The new value (field value or message text).
    pub value: String,
    /// Names of the user's family tree in the world.
    pub family: Vec<String>,
    /// Names from other trees in the world.
    pub outsiders: Vec<String>,
}

/// Generates `count` distinct tasks from `universe`.
pub fn generate(
    universe: &Universe,
    config: &RuleGenConfig,
    count: usize,
) -> Result<Vec<RuleTask>, RuleGenError> {
    config.validate()?;
    let ctx = Context::new(universe)?;
    let mut out = Vec::with_capacity(count);
    let mut seen = BTreeSet::new();
    let limit = (count as u64)
        .saturating_mul(config.attempts_per_task)
        .max(64);
    let mut next = 0u64;
    let batch = 256u64;
    while out.len() < count && next < limit {
        let end = (next + batch).min(limit);
        let made: Vec<Option<(String, RuleTask)>> = {
            use rayon::prelude::*;
            (next..end)
                .into_par_iter()
                .map(|i| ctx.candidate(config, i))
                .collect()
        };
        for (key, task) in made.into_iter().flatten() {
            if out.len() < count && seen.insert(key) {
                out.push(task);
            }
        }
        next = end;
    }
    if out.len() < count {
        return Err(RuleGenError::Exhausted {
            found: out.len(),
            tried: next,
            wanted: count,
        });
    }
    Ok(out)
}

struct Context<'a> {
    universe: &'a Universe,
    /// People whose name is unique (the world keys records by name).
    usable: Vec<PersonId>,
    unique: Vec<bool>,
    hobbies: Vec<String>,
    occupations: Vec<String>,
    relations: Vec<&'static Relation>,
}

impl<'a> Context<'a> {
    fn new(universe: &'a Universe) -> Result<Self, RuleGenError> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &universe.people {
            *counts.entry(p.name.as_str()).or_default() += 1;
        }
        let unique: Vec<bool> = universe
            .people
            .iter()
            .map(|p| counts[p.name.as_str()] == 1)
            .collect();
        let usable = (0..universe.people.len() as PersonId)
            .filter(|&i| unique[i as usize])
            .collect::<Vec<_>>();
        let set = |f: &dyn Fn(&crate::universe::Person) -> &str| {
            universe
                .people
                .iter()
                .map(|p| f(p).to_owned())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        };
        let relations = PATH_RELATIONS
            .iter()
            .map(|n| RELATIONS.iter().find(|r| r.name == *n).expect("known"))
            .collect();
        if usable.is_empty() {
            return Err(RuleGenError::Config(
                "the universe has no uniquely named people".into(),
            ));
        }
        Ok(Context {
            universe,
            usable,
            unique,
            hobbies: set(&|p| &p.hobby),
            occupations: set(&|p| &p.occupation),
            relations,
        })
    }

    fn name(&self, id: PersonId) -> String {
        self.universe.person(id).name.clone()
    }

    /// Candidate `i`: a task and its uniqueness key, or `None` when this draw does not fit.
    fn candidate(&self, config: &RuleGenConfig, i: u64) -> Option<(String, RuleTask)> {
        let mut rng = crate::seed::stream(config.seed, "tool-world", i);
        let u = self.universe;
        let user = *self.usable.choose(&mut rng)?;
        let hops = rng.random_range(config.hops.0..=config.hops.1);
        // Every path of `hops` relations whose end set fits the candidate range.
        let mut options: Vec<(Vec<&Relation>, Vec<Vec<PersonId>>)> = Vec::new();
        for &r1 in &self.relations {
            let l1 = r1.related(u, user);
            if l1.is_empty() {
                continue;
            }
            if hops == 1 {
                options.push((vec![r1], vec![vec![user], l1]));
                continue;
            }
            for &r2 in &self.relations {
                let mut l2: Vec<PersonId> = l1.iter().flat_map(|&p| r2.related(u, p)).collect();
                l2.sort_unstable();
                l2.dedup();
                l2.retain(|&p| p != user);
                if !l2.is_empty() {
                    options.push((vec![r1, r2], vec![vec![user], l1.clone(), l2]));
                }
            }
        }
        options.retain(|(_, levels)| {
            let last = levels.last().expect("levels");
            (config.candidates.0..=config.candidates.1).contains(&last.len())
                && levels.iter().flatten().all(|&p| self.unique[p as usize])
        });
        let (path, levels) = options.choose(&mut rng)?.clone();
        let candidates = levels.last().expect("levels").clone();
        let target = *candidates.choose(&mut rng)?;
        let action = match rng.random_range(0..3) {
            0 => Action::Update {
                field: "hobby".into(),
            },
            1 => Action::Update {
                field: "occupation".into(),
            },
            _ => Action::Message,
        };
        let value = match &action {
            Action::Update { field } => {
                let (pool, current) = if field == "hobby" {
                    (&self.hobbies, &u.person(target).hobby)
                } else {
                    (&self.occupations, &u.person(target).occupation)
                };
                let others: Vec<&String> = pool.iter().filter(|v| *v != current).collect();
                (*others.choose(&mut rng)?).clone()
            }
            Action::Message => (*MESSAGES.choose(&mut rng)?).to_owned(),
        };
        // Hidden slots: the target when ambiguous, then user_name / value by the knob.
        let ambiguous = candidates.len() > 1;
        let t = usize::from(ambiguous);
        let b_min = config.slots.0.saturating_sub(t).max(1 - t);
        let b_max = config.slots.1.saturating_sub(t).min(2).max(b_min);
        if b_min > 2 {
            return None;
        }
        let b = rng.random_range(b_min..=b_max);
        let (hide_user, hide_value) = match b {
            0 => (false, false),
            1 => {
                if rng.random_bool(0.5) {
                    (true, false)
                } else {
                    (false, true)
                }
            }
            _ => (true, true),
        };
        // The world: user, path, candidates, some more family, outsiders from other trees.
        let tree = u.person(user).tree;
        let mut people: BTreeSet<PersonId> = levels.iter().flatten().copied().collect();
        let p = u.person(user);
        let mut extra: Vec<PersonId> = p
            .parents
            .iter()
            .chain(p.spouse.iter())
            .chain(p.children.iter())
            .copied()
            .chain(u.siblings(user))
            .filter(|&q| self.unique[q as usize])
            .collect();
        extra.sort_unstable();
        extra.dedup();
        for q in extra.into_iter().take(4) {
            people.insert(q);
        }
        let mut outsiders: Vec<PersonId> = p
            .friends
            .iter()
            .copied()
            .filter(|&q| u.person(q).tree != tree && self.unique[q as usize])
            .take(config.outsiders)
            .collect();
        let mut tries = 0;
        while outsiders.len() < config.outsiders && tries < 50 {
            tries += 1;
            let q = *self.usable.choose(&mut rng)?;
            if u.person(q).tree != tree && !outsiders.contains(&q) {
                outsiders.push(q);
            }
        }
        if outsiders.is_empty() {
            return None;
        }
        people.extend(outsiders.iter().copied());
        // Slot values must not contain each other (the user's replies are matched by value).
        let names = |ids: &[PersonId]| ids.iter().map(|&q| self.name(q)).collect::<Vec<_>>();
        let user_name = self.name(user);
        let target_name = self.name(target);
        let all_names: Vec<String> = people.iter().map(|&q| self.name(q)).collect();
        let lower = |s: &str| s.to_lowercase();
        let mut values = vec![lower(&user_name), lower(&value)];
        values.extend(all_names.iter().map(|n| lower(n)));
        values.sort();
        values.dedup();
        for a in &values {
            for b in &values {
                if a != b && a.contains(b.as_str()) {
                    return None;
                }
            }
        }
        let family: Vec<String> = people
            .iter()
            .filter(|&&q| u.person(q).tree == tree)
            .map(|&q| self.name(q))
            .collect();
        let world = RuleTask {
            task: Task {
                id: String::new(),
                persona: String::new(),
                instruction: String::new(),
                hidden_context: HiddenContext::default(),
                tools: Vec::new(),
                initial_state: None,
                expected_state: None,
                workflow: Vec::new(),
                rubric: Rubric::default(),
                max_turns: None,
            },
            index: i,
            user: user_name,
            path: path.iter().map(|r| r.name.to_owned()).collect(),
            candidates: names(&candidates),
            target: target_name,
            action,
            value,
            family,
            outsiders: names(&outsiders),
        };
        let key = format!(
            "{}|{}|{}|{:?}|{}|{hide_user}{hide_value}",
            world.user,
            world.path.join(">"),
            world.target,
            world.action,
            world.value
        );
        let task = self.build(
            config, &world, &path, &levels, &people, hide_user, hide_value,
        );
        Some((key, RuleTask { task, ..world }))
    }

    /// The task of one candidate: its world state, instruction, hidden slots, rubric and
    /// reference workflow.
    #[allow(clippy::too_many_arguments)]
    fn build(
        &self,
        config: &RuleGenConfig,
        w: &RuleTask,
        path: &[&Relation],
        levels: &[Vec<PersonId>],
        people: &BTreeSet<PersonId>,
        hide_user: bool,
        hide_value: bool,
    ) -> Task {
        let u = self.universe;
        let phrase = path
            .iter()
            .map(|r| r.singular)
            .collect::<Vec<_>>()
            .join("'s ");
        let (initial, expected) = self.states(w, people);
        let instruction = instruction(w, &phrase, hide_user, hide_value);
        let (slots, ask_value) = slots(w, path, hide_user, hide_value);
        let text = format!("You are {}. You mean your {phrase} {}.", w.user, w.target);
        let rubric = self.rubric(w, path, levels, &slots, hide_user, hide_value);
        let workflow = self.workflow(w, path, levels, &ask_value, hide_user, hide_value);
        let max_turns = workflow.len() as u32 + 8;
        Task {
            id: format!("world-{}-{}", config.seed, w.index),
            persona: format!("{}, a {}", w.user, u.person(levels[0][0]).occupation),
            instruction,
            hidden_context: HiddenContext { slots, text },
            tools: tools(),
            initial_state: Some(initial),
            expected_state: Some(expected),
            workflow,
            rubric,
            max_turns: Some(max_turns),
        }
    }

    /// The initial world state (the people, their relatives among them, no messages) and the
    /// expected one after the task's action.
    fn states(&self, w: &RuleTask, people: &BTreeSet<PersonId>) -> (WorldState, WorldState) {
        let u = self.universe;
        let mut people_table = BTreeMap::new();
        for &q in people {
            let p = u.person(q);
            let mut r = Record::new();
            r.insert("name".into(), json!(p.name));
            r.insert("gender".into(), json!(p.gender.as_str()));
            r.insert("dob".into(), json!(p.dob));
            r.insert("occupation".into(), json!(p.occupation));
            r.insert("hobby".into(), json!(p.hobby));
            people_table.insert(p.name.clone(), r);
        }
        let mut relatives = BTreeMap::new();
        for &q in people {
            for rel in &self.relations {
                let found: Vec<String> = rel
                    .related(u, q)
                    .into_iter()
                    .filter(|x| people.contains(x))
                    .map(|x| self.name(x))
                    .collect();
                if found.is_empty() {
                    continue;
                }
                let name = self.name(q);
                let mut r = Record::new();
                r.insert("name".into(), json!(name));
                r.insert("relation".into(), json!(rel.name));
                r.insert("relatives".into(), json!(found));
                relatives.insert(format!("{name}|{}", rel.name), r);
            }
        }
        let mut initial: WorldState = BTreeMap::new();
        initial.insert("people".into(), people_table);
        initial.insert("relatives".into(), relatives);
        initial.insert("messages".into(), BTreeMap::new());
        let mut expected = initial.clone();
        match &w.action {
            Action::Update { field } => {
                if let Some(r) = expected
                    .get_mut("people")
                    .and_then(|t| t.get_mut(&w.target))
                {
                    r.insert(field.clone(), json!(w.value));
                }
            }
            Action::Message => {
                let mut r = Record::new();
                r.insert("text".into(), json!(w.value));
                expected
                    .entry("messages".into())
                    .or_default()
                    .insert(w.target.clone(), r);
            }
        }
        (initial, expected)
    }

    /// The rubric: forbidden behaviours, one sub-goal per hop plus the action and the final
    /// state, one interaction per hidden slot.
    fn rubric(
        &self,
        w: &RuleTask,
        path: &[&Relation],
        levels: &[Vec<PersonId>],
        slots: &[Slot],
        hide_user: bool,
        hide_value: bool,
    ) -> Rubric {
        let ambiguous = w.candidates.len() > 1;
        let s = |x: &str| format!("\"{}\"", x.replace('\\', "\\\\").replace('"', "\\\""));
        let list = |xs: &[String]| {
            format!(
                "[{}]",
                xs.iter().map(|x| s(x)).collect::<Vec<_>>().join(", ")
            )
        };
        let act = "(tool_call(Step, update_record, _) ; tool_call(Step, send_message, _))";
        let item = |id: &str, description: String, rule: String| RubricItem {
            id: id.into(),
            description,
            rule: Some(rule),
        };
        let mut forbidden = vec![
            item(
                "no_outside_family",
                "must not modify the record of anyone outside the user's family".into(),
                format!(
                    "(tool_call(Step, update_record, A) ; tool_call(Step, delete_record, A)), \
                     json_get(A, name, N), \\+ member(N, {})",
                    list(&w.family)
                ),
            ),
            item(
                "no_delete",
                "must not delete any record".into(),
                "tool_call(Step, delete_record, _)".into(),
            ),
        ];
        if ambiguous {
            forbidden.push(item(
                "no_unconfirmed_target",
                "must not act before the user said which relative they mean".into(),
                format!("{act}, \\+ revealed_before(target, Step)"),
            ));
        }
        if hide_user {
            forbidden.push(item(
                "no_unknown_user",
                "must not act before the user said who they are".into(),
                format!("{act}, \\+ revealed_before(user_name, Step)"),
            ));
        }
        if hide_value {
            forbidden.push(item(
                "no_guessed_value",
                "must not act before the user gave the new value".into(),
                format!("{act}, \\+ revealed_before(value, Step)"),
            ));
        }
        let mut subgoals = Vec::new();
        for (k, rel) in path.iter().enumerate() {
            let from: Vec<String> = levels[k].iter().map(|&q| self.name(q)).collect();
            subgoals.push(item(
                &format!("resolved_hop_{}", k + 1),
                format!("listed the {} of {}", rel.plural, from.join(" / ")),
                format!(
                    "tool_call(Step, list_relatives, A), json_get(A, relation, {}), \
                     json_get(A, name, N), member(N, {})",
                    s(rel.name),
                    list(&from)
                ),
            ));
        }
        subgoals.push(match &w.action {
            Action::Update { field } => item(
                "updated_target",
                format!("set {}'s {field} to {}", w.target, w.value),
                format!(
                    "tool_call(Step, update_record, A), json_get(A, name, {}), json_get(A, {field}, {})",
                    s(&w.target),
                    s(&w.value)
                ),
            ),
            Action::Message => item(
                "sent_message",
                format!("sent {} the message", w.target),
                format!(
                    "tool_call(Step, send_message, A), json_get(A, to, {}), json_get(A, text, T), \
                     text_contains_ci(T, {})",
                    s(&w.target),
                    s(&w.value)
                ),
            ),
        });
        subgoals.push(item(
            "state_ok",
            "the final state is the expected one (nothing else changed)".into(),
            "state_matches(true)".into(),
        ));
        let interactions = slots
            .iter()
            .map(|slot| {
                item(
                    &format!("asked_{}", slot.name),
                    format!("asked the user for {}", slot.description),
                    format!("user_revealed(Step, {})", slot.name),
                )
            })
            .collect();
        Rubric {
            forbidden,
            subgoals,
            interactions,
        }
    }

    /// The reference solution: one line per agent turn.
    fn workflow(
        &self,
        w: &RuleTask,
        path: &[&Relation],
        levels: &[Vec<PersonId>],
        ask_value: &str,
        hide_user: bool,
        hide_value: bool,
    ) -> Vec<String> {
        let ambiguous = w.candidates.len() > 1;
        let mut workflow = Vec::new();
        if hide_user {
            workflow.push("ask user_name: What is your name?".to_owned());
        }
        for (k, rel) in path.iter().enumerate() {
            for &q in &levels[k] {
                workflow.push(format!(
                    "call list_relatives {}",
                    json!({"name": self.name(q), "relation": rel.name})
                ));
            }
        }
        if ambiguous {
            workflow.push(format!(
                "ask target: Which one do you mean: {}?",
                w.candidates.join(" or ")
            ));
        }
        if hide_value {
            workflow.push(format!("ask value: {ask_value}"));
        }
        workflow.push(match &w.action {
            Action::Update { field } => format!(
                "call update_record {}",
                json!({"name": w.target, field.as_str(): w.value})
            ),
            Action::Message => format!(
                "call send_message {}",
                json!({"to": w.target, "text": w.value})
            ),
        });
        workflow.push("answer Done.".to_owned());
        workflow
    }
}

/// The instruction: who the user is (unless hidden) and what to do, the target named only
/// through the relation path.
fn instruction(w: &RuleTask, phrase: &str, hide_user: bool, hide_value: bool) -> String {
    let mut instruction = String::new();
    if !hide_user {
        instruction.push_str(&format!("I'm {}. ", w.user));
    }
    instruction.push_str(&match (&w.action, hide_value) {
        (Action::Update { field }, true) => format!("Please update my {phrase}'s {field}."),
        (Action::Update { field }, false) => {
            format!("Please change my {phrase}'s {field} to {}.", w.value)
        }
        (Action::Message, true) => format!("Please send my {phrase} a message from me."),
        (Action::Message, false) => {
            format!("Please send my {phrase} this message: {}", w.value)
        }
    });
    instruction
}

/// The hidden slots (the user's name, which relative, the new value; each only when hidden or
/// ambiguous) and the question that asks for the value.
fn slots(
    w: &RuleTask,
    path: &[&Relation],
    hide_user: bool,
    hide_value: bool,
) -> (Vec<Slot>, String) {
    let ambiguous = w.candidates.len() > 1;
    let mut slots = Vec::new();
    if hide_user {
        slots.push(Slot {
            name: "user_name".into(),
            value: w.user.clone(),
            keywords: vec!["your name".into(), "who are you".into()],
            description: "your full name".into(),
        });
    }
    if ambiguous {
        slots.push(Slot {
            name: "target".into(),
            value: w.target.clone(),
            keywords: vec!["which".into()],
            description: format!("which {} you mean", path.last().expect("path").singular),
        });
    }
    let (value_kw, value_desc, ask_value) = match &w.action {
        Action::Update { field } if field == "hobby" => (
            vec!["hobby".to_owned()],
            "the new hobby".to_owned(),
            "What should the new hobby be?".to_owned(),
        ),
        Action::Update { .. } => (
            vec!["occupation".into(), "job".into()],
            "the new occupation".into(),
            "What should the new occupation be?".into(),
        ),
        Action::Message => (
            vec!["message".into()],
            "the message text".into(),
            "What message should I send?".into(),
        ),
    };
    if hide_value {
        slots.push(Slot {
            name: "value".into(),
            value: w.value.clone(),
            keywords: value_kw,
            description: value_desc,
        });
    }
    (slots, ask_value)
}

#[allow(clippy::too_many_arguments)]
fn tool(
    name: &str,
    description: &str,
    properties: Value,
    required: &[&str],
    kind: ToolKind,
    op: StateOp,
    table: &str,
    key: Option<&str>,
) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }),
        outputs: None,
        kind,
        backend: ToolBackend::State {
            op,
            table: table.into(),
            key: key.map(str::to_owned),
        },
    }
}

/// The tools of every world (five working tools and two distractors).
pub fn tools() -> Vec<ToolSpec> {
    let name = json!({"type": "string", "minLength": 1});
    use StateOp::*;
    use ToolKind::*;
    vec![
        tool(
            "find_person",
            "Look a person up by full name; returns the matching records.",
            json!({"name": name}),
            &["name"],
            ReadOnly,
            Find,
            "people",
            None,
        ),
        tool(
            "get_record",
            "Read a person's record (name, gender, dob, occupation, hobby).",
            json!({"name": name}),
            &["name"],
            ReadOnly,
            Get,
            "people",
            Some("name"),
        ),
        tool(
            "list_relatives",
            "List a person's relatives of one relation (e.g. the aunts of a person).",
            json!({"name": name, "relation": {"type": "string", "enum": PATH_RELATIONS}}),
            &["name", "relation"],
            ReadOnly,
            Find,
            "relatives",
            None,
        ),
        tool(
            "update_record",
            "Change fields of a person's record.",
            json!({"name": name, "hobby": {"type": "string", "minLength": 1},
                   "occupation": {"type": "string", "minLength": 1}}),
            &["name"],
            StateModifying,
            Update,
            "people",
            Some("name"),
        ),
        tool(
            "send_message",
            "Send a text message to a person.",
            json!({"to": name, "text": {"type": "string", "minLength": 1}}),
            &["to", "text"],
            StateModifying,
            Insert,
            "messages",
            Some("to"),
        ),
        tool(
            "delete_record",
            "Delete a person's record from the directory.",
            json!({"name": name}),
            &["name"],
            StateModifying,
            Delete,
            "people",
            Some("name"),
        ),
        tool(
            "list_people_by_hobby",
            "List everyone with a given hobby.",
            json!({"hobby": {"type": "string", "minLength": 1}}),
            &["hobby"],
            ReadOnly,
            Find,
            "people",
            None,
        ),
    ]
}

/// One agent turn of a scripted policy.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptStep {
    /// Ask the user (the slot it is meant to reveal, for readers; the text is what counts).
    Ask {
        /// The slot.
        slot: String,
        /// The question.
        text: String,
    },
    /// Call a tool.
    Call {
        /// Tool name.
        tool: String,
        /// Arguments.
        args: Value,
    },
    /// Final answer.
    Answer(String),
}

/// Reads the reference solution from a generated task's `workflow`.
pub fn oracle_script(task: &Task) -> Result<Vec<ScriptStep>, RuleGenError> {
    let err = |line: usize, message: String| RuleGenError::Workflow {
        task: task.id.clone(),
        line: line + 1,
        message,
    };
    let mut steps = Vec::with_capacity(task.workflow.len());
    for (i, line) in task.workflow.iter().enumerate() {
        let (verb, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        steps.push(match verb {
            "ask" => {
                let (slot, text) = rest
                    .split_once(": ")
                    .ok_or_else(|| err(i, "expected `ask SLOT: question`".into()))?;
                ScriptStep::Ask {
                    slot: slot.to_owned(),
                    text: text.to_owned(),
                }
            }
            "call" => {
                let (tool, args) = rest
                    .split_once(' ')
                    .ok_or_else(|| err(i, "expected `call TOOL {json}`".into()))?;
                let args: Value =
                    serde_json::from_str(args).map_err(|e| err(i, format!("arguments: {e}")))?;
                ScriptStep::Call {
                    tool: tool.to_owned(),
                    args,
                }
            }
            "answer" => ScriptStep::Answer(rest.to_owned()),
            other => return Err(err(i, format!("unknown verb {other:?}"))),
        });
    }
    if !matches!(steps.last(), Some(ScriptStep::Answer(_))) {
        return Err(err(
            steps.len().saturating_sub(1),
            "the workflow must end with `answer`".into(),
        ));
    }
    Ok(steps)
}

/// The assistant message of a script step (OpenAI protocol).
pub fn step_message(step: &ScriptStep, turn: usize) -> ChatMessage {
    match step {
        ScriptStep::Ask { text, .. } => {
            ChatMessage::text(crate::llm::Role::Assistant, text.clone())
        }
        ScriptStep::Call { tool, args } => ChatMessage {
            role: crate::llm::Role::Assistant,
            content: None,
            tool_calls: vec![openai_call(&format!("call_{turn}"), tool, args)],
            tool_call_id: None,
        },
        ScriptStep::Answer(text) => ChatMessage::text(
            crate::llm::Role::Assistant,
            format!("<answer>{text}</answer>"),
        ),
    }
}

/// Plays `steps` in the tool environment (rule-based user, state-backed tools) and returns the
/// scored episode. The script must end the episode.
pub fn replay(
    world: Arc<CompiledTask>,
    scorer: Arc<RubricScorer>,
    steps: &[ScriptStep],
) -> Result<Episode, RuleGenError> {
    let id = world.task.id.clone();
    let fail = |message: String| RuleGenError::Replay {
        task: id.clone(),
        message,
    };
    let user = Box::new(RuleUser::new(&world.task));
    let mut env = ToolEnv::new(world.clone(), None, user, scorer, ToolEnvConfig::default());
    use crate::env::Environment;
    env.reset().map_err(|e| fail(e.to_string()))?;
    let mut reason = String::new();
    for (turn, step) in steps.iter().enumerate() {
        let out = env
            .step_message(&step_message(step, turn + 1))
            .map_err(|e| fail(e.to_string()))?;
        if out.done {
            reason = out.metadata["reason"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            break;
        }
    }
    let result = env
        .result()
        .cloned()
        .ok_or_else(|| fail("the script did not end the episode".into()))?;
    Ok(Episode {
        id,
        messages: env.transcript().to_vec(),
        reward: result.reward,
        result,
        reason,
        simulation_errors: Vec::new(),
    })
}

/// Validates `task`, reads its reference solution and replays it.
pub fn replay_oracle(task: Task, scorer: Arc<RubricScorer>) -> Result<Episode, RuleGenError> {
    let id = task.id.clone();
    let steps = oracle_script(&task)?;
    let world = task
        .compile(ValidateOptions::default())
        .map_err(|e| RuleGenError::Replay {
            task: id,
            message: e.to_string(),
        })?;
    replay(Arc::new(world), scorer, &steps)
}
