//! Stage `rubric`: executable rubric extraction. The model sees the task, its workflow, the
//! forbidden behaviour, the tools, the hidden slots and the facts of the usable teacher
//! rollouts, and writes forbidden behaviours, sub-goals (each linked to a workflow step) and
//! required interactions as Prolog rule bodies. Every body must pass the rubric whitelist
//! ([`crate::tooluse::rubric::check`]), the assembled task must validate, and the compiled rubric
//! must load into the rubric engine; otherwise the item is dropped with the reason.

use super::parse::{Reject, RejectReason, answer};
use super::prompt::{RUBRIC, ask};
use super::{Ctx, ItemError, Outcome, Stage, SynthItem, json_line, missing, numbered};
use crate::tooluse::rubric::{Event, RubricProgram, RubricScorer, Trajectory};
use crate::tooluse::task::{Rubric, RubricItem, ValidateOptions};
use serde::Deserialize;
use serde_json::Value;

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
        .ok_or_else(|| missing(Stage::Rubric, "forbidden"))?;
    let hidden = item
        .hidden_context
        .as_ref()
        .ok_or_else(|| missing(Stage::Rubric, "hidden_context"))?;
    if item.rollouts.is_empty() {
        return Err(missing(Stage::Rubric, "rollouts"));
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
    let rollouts: Vec<String> = item
        .rollouts
        .iter()
        .filter(|r| r.usable)
        .enumerate()
        .map(|(i, r)| format!("Episode {}:\n{}", i + 1, render_facts(&r.trajectory)))
        .collect();
    let response = ask(
        ctx,
        &RUBRIC,
        &[
            ("task", &item.task),
            ("workflow", &numbered(&item.workflow)),
            ("forbidden", &forbidden.statement()),
            ("tools", &tools.join("\n")),
            ("slots", &slots.join("\n")),
            ("rollouts", &rollouts.join("\n\n")),
        ],
    )?;
    let text = response.message.content_str();
    let answer: Answer = match answer(&response, "rubric") {
        Ok(a) => a,
        Err(reject) => return Ok(Err(reject)),
    };
    let scorer = ctx.scorer().map_err(|e| e.to_string())?;
    Ok(check(ctx, &scorer, item, answer).map_err(|r| r.with_answer(text)))
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

fn check(
    ctx: &Ctx,
    scorer: &RubricScorer,
    item: &SynthItem,
    a: Answer,
) -> Result<SynthItem, Box<Reject>> {
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
    let task = item.to_task(rubric.clone(), ctx.config.max_turns);
    let program = RubricProgram::compile(&task)
        .map_err(|e| Reject::new(RejectReason::RuleRejected, e.to_string()))?;
    task.validate(ValidateOptions::default())
        .map_err(|e| Reject::new(RejectReason::InvalidRubric, e.to_string()))?;
    scorer
        .load(&program)
        .map_err(|e| Reject::new(RejectReason::RubricLoad, e.to_string()))?;
    Ok(SynthItem {
        rubric: Some(rubric),
        subgoal_steps,
        ..item.clone()
    })
}
