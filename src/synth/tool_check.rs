//! Stage `tools`, the tool check: drops tools the model could do itself, keeps outputs
//! simulatable (an object schema of 1-2 fields), marks each tool read-only or state-modifying,
//! and adds 1-2 plausible distractor tools. Every draft tool must be kept or dropped with a
//! reason; the tool of the forbidden behaviour must stay.

use super::draft::check_tool;
use super::parse::{Reject, RejectReason, answer};
use super::prompt::{TOOLS, ask};
use super::{Ctx, ItemError, Outcome, SynthItem, SynthStage, json_line, missing, numbered};
use crate::tooluse::task::{ToolBackend, ToolKind, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// A draft tool the check removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DroppedTool {
    /// Tool name.
    pub name: String,
    /// Why it was dropped.
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    tools: Vec<AnswerTool>,
    #[serde(default)]
    dropped: Vec<DroppedTool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerTool {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    outputs: Option<Value>,
    kind: ToolKind,
    distractor: bool,
}

/// Most fields a simulatable output may have.
pub const MAX_OUTPUT_FIELDS: usize = 2;

pub(super) fn run(ctx: &Ctx, item: &SynthItem) -> Result<Outcome, ItemError> {
    let forbidden = item
        .forbidden
        .as_ref()
        .ok_or_else(|| missing(SynthStage::Tools, "forbidden"))?;
    if item.draft_tools.is_empty() {
        return Err(missing(SynthStage::Tools, "draft_tools"));
    }
    let tools = serde_json::to_value(&item.draft_tools).map_err(|e| e.to_string())?;
    let response = ask(
        ctx,
        &TOOLS,
        &[
            ("task", &item.task),
            ("workflow", &numbered(&item.workflow)),
            ("forbidden", &forbidden.statement()),
            ("tools", &json_line(&tools)),
        ],
    )?;
    let text = response.message.content_str();
    let answer: Answer = match answer(&response, "tools") {
        Ok(a) => a,
        Err(reject) => return Ok(Err(reject)),
    };
    Ok(check(item, &forbidden.tool, answer).map_err(|r| r.with_answer(text)))
}

fn check(item: &SynthItem, forbidden_tool: &str, a: Answer) -> Result<SynthItem, Box<Reject>> {
    let reject = |reason, detail: String| Err(Reject::new(reason, detail));
    let draft: BTreeSet<&str> = item.draft_tools.iter().map(|t| t.name.as_str()).collect();
    let mut names = BTreeSet::new();
    let mut tools = Vec::new();
    let mut kept = BTreeSet::new();
    let mut distractors = Vec::new();
    for t in a.tools {
        let (parameters, outputs) = check_tool(&t.name, t.parameters, t.outputs, &mut names)?;
        let fields = outputs
            .get("properties")
            .and_then(Value::as_object)
            .map_or(0, |p| p.len());
        if outputs.get("type").and_then(Value::as_str) != Some("object")
            || !(1..=MAX_OUTPUT_FIELDS).contains(&fields)
        {
            return reject(
                RejectReason::OutputsNotSimulatable,
                format!(
                    "tool {}: outputs must be an object schema with 1-{MAX_OUTPUT_FIELDS} \
                     properties, got {fields}",
                    t.name
                ),
            );
        }
        if t.distractor {
            if draft.contains(t.name.as_str()) {
                return reject(
                    RejectReason::ToolMismatch,
                    format!("distractor {} is a tool of the task", t.name),
                );
            }
            distractors.push(t.name.clone());
        } else {
            if !draft.contains(t.name.as_str()) {
                return reject(
                    RejectReason::ToolMismatch,
                    format!("tool {} is not in the draft and not a distractor", t.name),
                );
            }
            kept.insert(t.name.clone());
        }
        tools.push(ToolSpec {
            name: t.name,
            description: t.description.trim().to_owned(),
            parameters,
            outputs: Some(outputs),
            kind: t.kind,
            backend: ToolBackend::Mapping,
        });
    }
    let mut dropped_names = BTreeSet::new();
    for d in &a.dropped {
        if !draft.contains(d.name.as_str()) || kept.contains(&d.name) || d.reason.trim().is_empty()
        {
            return reject(
                RejectReason::ToolMismatch,
                format!(
                    "dropped tool {} is not a draft tool, is also kept, or has no reason",
                    d.name
                ),
            );
        }
        dropped_names.insert(d.name.as_str());
    }
    if dropped_names.contains(forbidden_tool) || !kept.contains(forbidden_tool) {
        return reject(
            RejectReason::ForbiddenToolDropped,
            format!("tool {forbidden_tool} of the forbidden behaviour must be kept"),
        );
    }
    if let Some(lost) = draft
        .iter()
        .find(|n| !kept.contains(**n) && !dropped_names.contains(**n))
    {
        return reject(
            RejectReason::ToolMismatch,
            format!("draft tool {lost} is neither kept nor dropped"),
        );
    }
    if !(1..=2).contains(&distractors.len()) {
        return reject(
            RejectReason::DistractorCount,
            format!("1-2 distractor tools expected, got {}", distractors.len()),
        );
    }
    Ok(SynthItem {
        tools,
        distractors,
        dropped: a.dropped,
        ..item.clone()
    })
}
