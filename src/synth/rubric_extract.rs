//! Stage `rubric`: executable rubric extraction. The model sees the task, its workflow, the
//! forbidden behaviour, the tools, the hidden slots and the facts of usable teacher rollouts,
//! and writes forbidden behaviours, sub-goals (each linked to a workflow step) and required
//! interactions as Prolog rule bodies. Every body must pass the rubric whitelist
//! ([`crate::tooluse::rubric::check`]), the assembled task must validate, and the compiled rubric
//! must load into the rubric engine; otherwise the item is dropped with the reason.
//!
//! Two modes ([`Extraction`]):
//!
//! - `joint` (the default): one request shows every usable rollout; its answer is the rubric.
//! - `per-trajectory` (SynthAgent's): one request per usable rollout, the same prompt showing
//!   only that rollout's facts (as "Episode 1", with the workflow as the reference), sent with
//!   the rollout's own seed. Each answer is parsed and checked on its own exactly like a joint
//!   answer (shape, non-empty lists, rules, workflow links, whitelist, task validation). The
//!   valid answers are then merged ([`MERGE_VERSION`]): sub-goals are grouped by their workflow
//!   step, forbidden and interaction items by id; groups and the bodies inside a group keep
//!   the order of first appearance over the answers in rollout order; a group keeps the id and
//!   description of its first item; its distinct bodies (compared as read terms, so spacing does
//!   not count) become one disjunction `(B1) ; (B2) ; ...` (one distinct body stays as
//!   written), since a sub-goal "can be reached by several paths"; an id already taken by an
//!   earlier group (forbidden, then sub-goals, then interactions) gets the first free suffix
//!   `_2`, `_3`, ... The merged rubric is checked and loaded like a joint answer.
//!
//!   An invalid answer is never dropped silently: the first invalid answer, in rollout order,
//!   rejects the task with its own reason code, the rollout named in the detail and that answer
//!   recorded, and the remaining rollouts are not asked (so a task whose answers are all
//!   invalid is rejected by its first). Merging only the valid answers would give a rubric
//!   blind to the paths of the rollouts whose answers failed, while the filter still scores
//!   those rollouts with it.

use super::parse::{Reject, RejectReason, answer};
use super::prompt::{RUBRIC, ask_seeded};
use super::{
    Ctx, Extraction, ItemError, Outcome, SynthItem, SynthStage, json_line, missing, numbered,
};
use crate::engine::{Term, read_term};
use crate::llm::ChatResponse;
use crate::tooluse::rubric::check::RUBRIC_LIMITS;
use crate::tooluse::rubric::{Event, RubricScorer, Trajectory};
use crate::tooluse::task::{Rubric, RubricItem, ValidateOptions};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;

/// Version of the per-trajectory merge rules, part of the rubric stage's fingerprint in that
/// mode (a change to the merge recomputes the stage on resume).
pub const MERGE_VERSION: &str = "rubric-merge.v1";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    forbidden: Vec<AnswerItem>,
    subgoals: Vec<AnswerItem>,
    interactions: Vec<AnswerItem>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerItem {
    id: String,
    #[serde(default)]
    description: String,
    /// Sub-goals only: the 1-based workflow step.
    #[serde(default)]
    workflow: Option<u32>,
    #[serde(default)]
    rule: Option<String>,
}

/// Longest text of a fact shown in the prompt, in characters.
const MAX_SHOWN_TEXT: usize = 300;

fn quoted(text: &str) -> String {
    let cut: String = text.chars().take(MAX_SHOWN_TEXT).collect();
    json_line(&Value::String(cut))
}

/// A trajectory's facts, one per line, as the rubric prompt shows them.
pub(super) fn render_facts(trajectory: &Trajectory) -> String {
    let mut lines = Vec::new();
    for e in &trajectory.events {
        lines.push(match e {
            Event::ToolCall { step, tool, args } => {
                format!("tool_call({step}, {tool}, {})", json_line(args))
            }
            Event::ToolResult { step, tool, result } => {
                format!("tool_result({step}, {tool}, {})", json_line(result))
            }
            Event::ToolError { step, tool, reason } => {
                format!("tool_error({step}, {tool}, {})", quoted(reason))
            }
            Event::AskedUser { step, text } => format!("asked_user({step}, {})", quoted(text)),
            Event::UserSaid { step, text } => format!("user_said({step}, {})", quoted(text)),
            Event::UserRevealed { step, slot } => format!("user_revealed({step}, {slot})"),
            Event::Answered { step, text } => format!("answered({step}, {})", quoted(text)),
            Event::Said { step, text } => format!("said({step}, {})", quoted(text)),
            Event::Stopped { step, marker } => {
                let atom = serde_json::to_value(marker).unwrap_or_default();
                format!("stopped({step}, {})", atom.as_str().unwrap_or_default())
            }
        });
    }
    lines.push(format!("turns({})", trajectory.turns));
    lines.join("\n")
}

pub(super) fn run(ctx: &Ctx, item: &SynthItem) -> Result<Outcome, ItemError> {
    let forbidden = item
        .forbidden
        .as_ref()
        .ok_or_else(|| missing(SynthStage::Rubric, "forbidden"))?;
    let hidden = item
        .hidden_context
        .as_ref()
        .ok_or_else(|| missing(SynthStage::Rubric, "hidden_context"))?;
    if item.rollouts.is_empty() {
        return Err(missing(SynthStage::Rubric, "rollouts"));
    }
    let tools: Vec<String> = item
        .tools
        .iter()
        .map(|t| {
            let kind = serde_json::to_value(t.kind).unwrap_or_default();
            format!(
                "- {} ({}): {} Parameters: {}",
                t.name,
                kind.as_str().unwrap_or_default(),
                t.description,
                json_line(&t.parameters)
            )
        })
        .collect();
    let slots: Vec<String> = hidden
        .slots
        .iter()
        .map(|s| format!("- {} = {}", s.name, s.value))
        .collect();
    let (workflow, forbidden, tools, slots) = (
        numbered(&item.workflow),
        forbidden.statement(),
        tools.join("\n"),
        slots.join("\n"),
    );
    let ask = |rollouts: &str, seed: u64| {
        ask_seeded(
            ctx,
            &RUBRIC,
            &[
                ("task", &item.task),
                ("workflow", &workflow),
                ("forbidden", &forbidden),
                ("tools", &tools),
                ("slots", &slots),
                ("rollouts", rollouts),
            ],
            seed,
        )
    };
    match ctx.config.extraction {
        Extraction::Joint => joint(ctx, item, ask),
        Extraction::PerTrajectory => per_trajectory(ctx, item, ask),
    }
}

/// One request over every usable rollout.
fn joint(
    ctx: &Ctx,
    item: &SynthItem,
    ask: impl Fn(&str, u64) -> Result<ChatResponse, ItemError>,
) -> Result<Outcome, ItemError> {
    let rollouts: Vec<String> = item
        .rollouts
        .iter()
        .filter(|r| r.usable)
        .enumerate()
        .map(|(i, r)| format!("Episode {}:\n{}", i + 1, render_facts(&r.trajectory)))
        .collect();
    let response = ask(&rollouts.join("\n\n"), ctx.config.seed)?;
    let text = response.message.content_str();
    let answer: Answer = match answer(&response, "rubric") {
        Ok(a) => a,
        Err(reject) => return Ok(Err(reject)),
    };
    let scorer = ctx.scorer().map_err(|e| e.to_string())?;
    Ok(check(ctx, &scorer, item, answer).map_err(|r| r.with_answer(text)))
}

/// One request per usable rollout, each answer checked on its own, then merged (see the module
/// documentation).
fn per_trajectory(
    ctx: &Ctx,
    item: &SynthItem,
    ask: impl Fn(&str, u64) -> Result<ChatResponse, ItemError>,
) -> Result<Outcome, ItemError> {
    let usable: Vec<(usize, &super::Rollout)> = item
        .rollouts
        .iter()
        .enumerate()
        .filter(|(_, r)| r.usable)
        .collect();
    if usable.is_empty() {
        return Err(missing(SynthStage::Rubric, "usable rollouts"));
    }
    let n = usable.len();
    let mut answers = Vec::with_capacity(n);
    let mut texts = Vec::with_capacity(n);
    for (k, &(index, rollout)) in usable.iter().enumerate() {
        let episode = format!("Episode 1:\n{}", render_facts(&rollout.trajectory));
        let response = ask(&episode, rollout.seed)?;
        let text = response.message.content_str();
        let checked = answer::<Answer>(&response, "rubric")
            .and_then(|a| assemble(item, a))
            .and_then(|(rubric, steps)| {
                verify(ctx, None, item, &rubric)?;
                Ok((rubric, steps))
            });
        match checked {
            Ok(rubric) => answers.push(rubric),
            Err(mut reject) => {
                reject.detail = format!(
                    "per-trajectory answer for rollout {index} ({} of {n} usable): {}",
                    k + 1,
                    reject.detail
                );
                return Ok(Err(reject.with_answer(text)));
            }
        }
        texts.push(format!("=== rollout {index} ===\n{text}"));
    }
    let scorer = ctx.scorer().map_err(|e| e.to_string())?;
    let merged = merge(&answers).and_then(|(rubric, steps)| {
        verify(ctx, Some(&scorer), item, &rubric).map(|()| (rubric, steps))
    });
    match merged {
        Ok((rubric, subgoal_steps)) => Ok(Ok(SynthItem {
            rubric: Some(rubric),
            subgoal_steps,
            ..item.clone()
        })),
        Err(mut reject) => {
            reject.detail = format!("merged rubric of {n} answers: {}", reject.detail);
            Ok(Err(reject.with_answer(&texts.join("\n"))))
        }
    }
}

/// The items of one list with their workflow links; every item needs a rule.
fn items(list: Vec<AnswerItem>, what: &str) -> Result<Vec<(RubricItem, Option<u32>)>, Box<Reject>> {
    if list.is_empty() {
        return Err(Reject::new(
            RejectReason::InvalidRubric,
            format!("the rubric has no {what} items"),
        ));
    }
    let mut out = Vec::new();
    for a in list {
        let rule = a.rule.filter(|r| !r.trim().is_empty()).ok_or_else(|| {
            Reject::new(
                RejectReason::InvalidRubric,
                format!("{what} item {:?} has no rule", a.id),
            )
        })?;
        let item = RubricItem {
            id: a.id,
            description: a.description.trim().to_owned(),
            rule: Some(rule),
        };
        out.push((item, a.workflow));
    }
    Ok(out)
}

/// An answer as a rubric and the workflow step of each sub-goal: every list non-empty, every
/// item with a rule, every sub-goal linked to a step of the workflow.
fn assemble(item: &SynthItem, a: Answer) -> Result<(Rubric, Vec<u32>), Box<Reject>> {
    let plain = |list: Vec<(RubricItem, Option<u32>)>| list.into_iter().map(|(i, _)| i).collect();
    let forbidden = plain(items(a.forbidden, "forbidden")?);
    let interactions = plain(items(a.interactions, "interaction")?);
    let linked = items(a.subgoals, "sub-goal")?;
    let n = item.workflow.len() as u32;
    let mut subgoal_steps = Vec::new();
    let mut subgoals = Vec::new();
    for (goal, step) in linked {
        match step {
            Some(k) if (1..=n).contains(&k) => {
                subgoal_steps.push(k);
                subgoals.push(goal);
            }
            other => {
                return Err(Reject::new(
                    RejectReason::WorkflowLink,
                    format!(
                        "sub-goal {} must name a workflow step 1-{n}, got {other:?}",
                        goal.id
                    ),
                ));
            }
        }
    }
    let rubric = Rubric {
        forbidden,
        subgoals,
        interactions,
    };
    Ok((rubric, subgoal_steps))
}

/// Checks `rubric` as the task's: every rule compiles under the whitelist, the task validates,
/// and (with a scorer) the compiled rubric loads into the rubric engine.
fn verify(
    ctx: &Ctx,
    scorer: Option<&RubricScorer>,
    item: &SynthItem,
    rubric: &Rubric,
) -> Result<(), Box<Reject>> {
    let task = item.to_task(rubric.clone(), ctx.config.max_turns);
    let program = task
        .rubric_program()
        .map_err(|e| Reject::new(RejectReason::RuleRejected, e.to_string()))?;
    task.validate(ValidateOptions::default())
        .map_err(|e| Reject::new(RejectReason::InvalidRubric, e.to_string()))?;
    if let Some(scorer) = scorer {
        scorer
            .load(&program)
            .map_err(|e| Reject::new(RejectReason::RubricLoad, e.to_string()))?;
    }
    Ok(())
}

fn check(
    ctx: &Ctx,
    scorer: &RubricScorer,
    item: &SynthItem,
    a: Answer,
) -> Result<SynthItem, Box<Reject>> {
    let (rubric, subgoal_steps) = assemble(item, a)?;
    verify(ctx, Some(scorer), item, &rubric)?;
    Ok(SynthItem {
        rubric: Some(rubric),
        subgoal_steps,
        ..item.clone()
    })
}

/// Items of several answers that become one merged item.
struct Group {
    /// The first item's id.
    id: String,
    /// The first item's description.
    description: String,
    /// Sub-goal groups: the workflow step.
    step: Option<u32>,
    /// The distinct bodies (as read, and as written), in order of first appearance.
    bodies: Vec<(Term, String)>,
}

/// Adds `item` to the group `same` finds (a new group at the end when none).
fn add(
    groups: &mut Vec<Group>,
    item: &RubricItem,
    step: Option<u32>,
    same: impl Fn(&Group) -> bool,
) -> Result<(), Box<Reject>> {
    let rule = item.rule.clone().unwrap_or_default();
    let term = read_term(&rule, &RUBRIC_LIMITS)
        .map_err(|e| Reject::new(RejectReason::RuleRejected, format!("item {}: {e}", item.id)))?;
    let index = match groups.iter().position(same) {
        Some(i) => i,
        None => {
            groups.push(Group {
                id: item.id.clone(),
                description: item.description.clone(),
                step,
                bodies: Vec::new(),
            });
            groups.len() - 1
        }
    };
    let group = &mut groups[index];
    if !group.bodies.iter().any(|(t, _)| *t == term) {
        group.bodies.push((term, rule));
    }
    Ok(())
}

/// Merges checked answers (in rollout order) into one rubric and its sub-goals' steps.
fn merge(answers: &[(Rubric, Vec<u32>)]) -> Result<(Rubric, Vec<u32>), Box<Reject>> {
    let (mut forbidden, mut subgoals, mut interactions) = (Vec::new(), Vec::new(), Vec::new());
    for (rubric, steps) in answers {
        for item in &rubric.forbidden {
            add(&mut forbidden, item, None, |g| g.id == item.id)?;
        }
        for (item, &step) in rubric.subgoals.iter().zip(steps) {
            add(&mut subgoals, item, Some(step), |g| g.step == Some(step))?;
        }
        for item in &rubric.interactions {
            add(&mut interactions, item, None, |g| g.id == item.id)?;
        }
    }
    let mut used = BTreeSet::new();
    let steps = subgoals.iter().filter_map(|g| g.step).collect();
    let mut finish = |groups: Vec<Group>| -> Result<Vec<RubricItem>, Box<Reject>> {
        groups
            .into_iter()
            .map(|g| {
                Ok(RubricItem {
                    id: unique_id(&g.id, &mut used),
                    description: g.description,
                    rule: Some(disjunction(&g.bodies)?),
                })
            })
            .collect()
    };
    let rubric = Rubric {
        forbidden: finish(forbidden)?,
        subgoals: finish(subgoals)?,
        interactions: finish(interactions)?,
    };
    Ok((rubric, steps))
}

/// `base`, or when it is taken, `base_N` for the smallest free N >= 2 (cut so it stays a valid
/// item id of at most 64 characters).
fn unique_id(base: &str, used: &mut BTreeSet<String>) -> String {
    if used.insert(base.to_owned()) {
        return base.to_owned();
    }
    let mut n = 2u64;
    loop {
        let suffix = format!("_{n}");
        let keep = 64usize.saturating_sub(suffix.len());
        let candidate = format!("{}{suffix}", base.chars().take(keep).collect::<String>());
        if used.insert(candidate.clone()) {
            return candidate;
        }
        n += 1;
    }
}

/// The distinct bodies of a group as one rule: the body itself when there is one, otherwise
/// `(B1) ; (B2) ; ...`. Each branch is the body as written when that reads back to the same
/// term inside the parentheses (else without its final full stop, else with a line break
/// before the closing parenthesis for a trailing `%` comment), and the body's canonical
/// rendering otherwise; the whole is read back and must be the disjunction of the bodies' terms
/// (else it is the canonical rendering of that disjunction).
fn disjunction(bodies: &[(Term, String)]) -> Result<String, Box<Reject>> {
    let render = |term: &Term| {
        term.render()
            .map_err(|e| Reject::new(RejectReason::RuleRejected, e.to_string()))
    };
    let reads_as =
        |text: &str, term: &Term| read_term(text, &RUBRIC_LIMITS).is_ok_and(|t| t == *term);
    match bodies {
        [] => return Ok(String::new()),
        [(_, text)] => return Ok(text.clone()),
        _ => {}
    }
    let mut branches = Vec::with_capacity(bodies.len());
    for (term, text) in bodies {
        let trimmed = text.trim();
        let candidates = [
            Some(format!("({trimmed})")),
            trimmed
                .strip_suffix('.')
                .map(|t| format!("({})", t.trim_end())),
            Some(format!("({trimmed}\n)")),
        ];
        let branch = match candidates.into_iter().flatten().find(|c| reads_as(c, term)) {
            Some(branch) => branch,
            None => format!("({})", render(term)?),
        };
        branches.push(branch);
    }
    let merged = branches.join(" ; ");
    let expected = bodies
        .iter()
        .map(|(t, _)| t.clone())
        .rev()
        .reduce(|rest, t| Term::compound(";", [t, rest]))
        .unwrap_or_else(|| Term::atom("fail"));
    if reads_as(&merged, &expected) {
        Ok(merged)
    } else {
        render(&expected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tooluse::rubric::check::Checker;

    fn item(id: &str, rule: &str) -> RubricItem {
        RubricItem {
            id: id.into(),
            description: format!("{id} description"),
            rule: Some(rule.into()),
        }
    }

    fn rubric(
        forbidden: &[(&str, &str)],
        subgoals: &[(&str, &str)],
        inter: &[(&str, &str)],
    ) -> Rubric {
        let list = |l: &[(&str, &str)]| l.iter().map(|(id, r)| item(id, r)).collect();
        Rubric {
            forbidden: list(forbidden),
            subgoals: list(subgoals),
            interactions: list(inter),
        }
    }

    #[test]
    fn synth_merge_groups_steps_and_ids_in_order_of_first_appearance() {
        let a = (
            rubric(
                &[("no_x", "tool_call(Step, x, _)")],
                &[("s1", "called(a)"), ("s2", "called(b)")],
                &[("i1", "user_revealed(Step, p)")],
            ),
            vec![1, 2],
        );
        let b = (
            rubric(
                &[
                    ("no_y", "tool_call(Step, y, _)"),
                    ("no_x", "tool_call(Step, x, A), A \\= []"),
                ],
                &[
                    ("t3", "called(c)"),
                    ("t1", "called( a )"),
                    ("t1b", "called(d) -> true ; called(e)"),
                ],
                &[("s1", "user_revealed(Step, q)")],
            ),
            vec![3, 1, 1],
        );
        let (merged, steps) = merge(&[a.clone(), b.clone()]).unwrap();
        let ids: Vec<&str> = merged.items().map(|(_, i)| i.id.as_str()).collect();
        assert_eq!(ids, ["no_x", "no_y", "s1", "s2", "t3", "i1", "s1_2"]);
        assert_eq!(steps, [1, 2, 3]);
        let rules: Vec<&str> = merged
            .items()
            .map(|(_, i)| i.rule.as_deref().unwrap())
            .collect();
        assert_eq!(
            rules,
            [
                "(tool_call(Step, x, _)) ; (tool_call(Step, x, A), A \\= [])",
                "tool_call(Step, y, _)",
                "(called(a)) ; (called(d) -> true ; called(e))",
                "called(b)",
                "called(c)",
                "user_revealed(Step, p)",
                "user_revealed(Step, q)",
            ]
        );
        assert_eq!(merged.subgoals[0].description, "s1 description");
        // The same answers in the same order merge to the same bytes; another order is another
        // (equally valid) first appearance.
        assert_eq!(
            merge(&[a.clone(), b.clone()]).unwrap(),
            (merged.clone(), steps)
        );
        let (swapped, swapped_steps) = merge(&[b, a]).unwrap();
        assert_eq!(swapped_steps, [3, 1, 2]);
        assert_eq!(swapped.subgoals[1].id, "t1");
        // Every merged body passes the rubric whitelist (`;` included).
        let mut checker = Checker::new();
        for rule in rules {
            checker.check(rule).unwrap();
        }
    }

    #[test]
    fn synth_disjunction_keeps_each_body_a_branch() {
        let body = |text: &str| (read_term(text, &RUBRIC_LIMITS).unwrap(), text.to_owned());
        // An if-then body stays one branch: not an if-then-else with the next body.
        let merged = disjunction(&[body("called(a) -> called(b)"), body("called(c)")]).unwrap();
        assert_eq!(merged, "(called(a) -> called(b)) ; (called(c))");
        let Term::Compound(op, args) = read_term(&merged, &RUBRIC_LIMITS).unwrap() else {
            panic!("not a compound");
        };
        assert_eq!(op, ";");
        assert!(matches!(&args[0], Term::Compound(op, _) if op == "->"));
        // Final full stops and comments do not leak into the merged text.
        let merged = disjunction(&[
            body("called(a). % done"),
            body("called(b) /* x */ ."),
            body("called(c) % c"),
        ])
        .unwrap();
        let expected = read_term("called(a) ; called(b) ; called(c)", &RUBRIC_LIMITS).unwrap();
        assert_eq!(read_term(&merged, &RUBRIC_LIMITS).unwrap(), expected);
        assert!(merged.ends_with("(called(c) % c\n)"), "{merged}");
        // One distinct body stays exactly as written.
        assert_eq!(
            disjunction(&[body(" called(a). ")]).unwrap(),
            " called(a). "
        );
    }

    #[test]
    fn synth_unique_ids_stay_valid_item_ids() {
        let mut used = BTreeSet::new();
        let long = "a".repeat(64);
        assert_eq!(unique_id(&long, &mut used), long);
        let second = unique_id(&long, &mut used);
        assert_eq!(second, format!("{}_2", "a".repeat(62)));
        assert!(crate::tooluse::task::valid_ident(&second));
        assert_eq!(unique_id(&long, &mut used), format!("{}_3", "a".repeat(62)));
        assert_eq!(unique_id("x", &mut used), "x");
        used.insert("x_2".into());
        assert_eq!(unique_id("x", &mut used), "x_3");
    }

    #[test]
    fn synth_extraction_names_parse_and_serialise_alike() {
        for mode in Extraction::ALL {
            assert_eq!(Extraction::parse(mode.name()).unwrap(), mode);
            assert_eq!(serde_json::to_value(mode).unwrap(), mode.name());
        }
        assert!(Extraction::parse("per_trajectory").is_err());
        assert_eq!(Extraction::default(), Extraction::Joint);
    }
}
