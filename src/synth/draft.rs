//! Stage `draft`: a persona seed becomes a task with every detail, a workflow of 5-7 sub-goals,
//! 3-5 tools of different categories with `parameters` and `outputs` schemas, and one forbidden
//! behaviour ("Tool X must NOT be used to Y") with its real-world reason.

use super::parse::{Reject, RejectReason, answer};
use super::prompt::{DRAFT, ask};
use super::{Ctx, ItemError, Outcome, SynthItem};
use crate::tooluse::schema::Schema;
use crate::tooluse::task::valid_ident;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// The forbidden behaviour: tool `tool` must NOT be used to `action`, because `reason`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Forbidden {
    /// The tool.
    pub tool: String,
    /// What it must not be used to do.
    pub action: String,
    /// The real-world reason.
    pub reason: String,
}

impl Forbidden {
    /// "Tool X must NOT be used to Y (reason: Z)".
    pub fn statement(&self) -> String {
        format!(
            "Tool {} must NOT be used to {} (reason: {})",
            self.tool, self.action, self.reason
        )
    }
}

/// A tool as the draft wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DraftTool {
    /// Function name (`[a-z][a-z0-9_]*`).
    pub name: String,
    /// Category (distinct across the draft's tools).
    pub category: String,
    /// What it does.
    pub description: String,
    /// JSON schema of the arguments (an object schema).
    pub parameters: Value,
    /// JSON schema of the response.
    pub outputs: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    task: String,
    workflow: Vec<String>,
    tools: Vec<AnswerTool>,
    forbidden: Forbidden,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerTool {
    name: String,
    category: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    outputs: Option<Value>,
}

/// Sub-goals a workflow must have.
pub const WORKFLOW_LEN: std::ops::RangeInclusive<usize> = 5..=7;
/// Tools a draft must have.
pub const TOOL_COUNT: std::ops::RangeInclusive<usize> = 3..=5;

pub(super) fn run(ctx: &Ctx, item: &SynthItem) -> Result<Outcome, ItemError> {
    let response = ask(ctx, &DRAFT, &[("persona", &item.persona)])?;
    let text = response.message.content_str();
    let answer: Answer = match answer(&response, "task") {
        Ok(a) => a,
        Err(reject) => return Ok(Err(reject)),
    };
    Ok(check(item, answer).map_err(|r| r.with_answer(text)))
}

fn check(item: &SynthItem, a: Answer) -> Result<SynthItem, Box<Reject>> {
    let reject = |reason, detail: String| Err(Reject::new(reason, detail));
    if a.task.trim().is_empty() {
        return reject(RejectReason::InvalidShape, "\"task\" is empty".into());
    }
    if !WORKFLOW_LEN.contains(&a.workflow.len()) || a.workflow.iter().any(|s| s.trim().is_empty()) {
        return reject(
            RejectReason::WorkflowSize,
            format!(
                "the workflow must have 5-7 non-empty sub-goals, got {}",
                a.workflow.len()
            ),
        );
    }
    if !TOOL_COUNT.contains(&a.tools.len()) {
        return reject(
            RejectReason::ToolCount,
            format!("3-5 tools expected, got {}", a.tools.len()),
        );
    }
    let mut names = BTreeSet::new();
    let mut categories = BTreeSet::new();
    let mut tools = Vec::new();
    for t in a.tools {
        let (parameters, outputs) = check_tool(&t.name, t.parameters, t.outputs, &mut names)?;
        let category = t.category.trim().to_lowercase();
        if category.is_empty() || !categories.insert(category.clone()) {
            return reject(
                RejectReason::ToolCategories,
                format!(
                    "tool {}: category {:?} is empty or shared with another tool",
                    t.name, t.category
                ),
            );
        }
        tools.push(DraftTool {
            name: t.name,
            category,
            description: t.description.trim().to_owned(),
            parameters,
            outputs,
        });
    }
    let f = a.forbidden;
    if !names.contains(f.tool.as_str()) || f.action.trim().is_empty() || f.reason.trim().is_empty()
    {
        return reject(
            RejectReason::ForbiddenBehaviour,
            format!(
                "the forbidden behaviour must name one of the tools ({}) with an action and a \
                 reason, got tool {:?}",
                names.iter().cloned().collect::<Vec<_>>().join(", "),
                f.tool
            ),
        );
    }
    Ok(SynthItem {
        task: a.task.trim().to_owned(),
        workflow: a.workflow.iter().map(|s| s.trim().to_owned()).collect(),
        forbidden: Some(f),
        draft_tools: tools,
        ..item.clone()
    })
}

/// Checks one tool of an answer: a new valid name ([`check_name`]) and both schemas
/// ([`check_schemas`]); returns the schemas.
pub(super) fn check_tool(
    name: &str,
    parameters: Option<Value>,
    outputs: Option<Value>,
    names: &mut BTreeSet<String>,
) -> Result<(Value, Value), Box<Reject>> {
    check_name(name, names)?;
    let (Some(parameters), Some(outputs)) = (parameters, outputs) else {
        return Err(Reject::new(
            RejectReason::ToolWithoutSchema,
            format!("tool {name} needs both a parameters and an outputs schema"),
        ));
    };
    check_schemas(name, &parameters, &outputs)?;
    Ok((parameters, outputs))
}

/// A tool name must be a Prolog-safe identifier (rubric rules name tools as atoms), unique.
fn check_name(name: &str, names: &mut BTreeSet<String>) -> Result<(), Box<Reject>> {
    if !valid_ident(name) {
        return Err(Reject::new(
            RejectReason::InvalidToolName,
            format!("tool name {name:?} must match [a-z][a-z0-9_]* (at most 64)"),
        ));
    }
    if !names.insert(name.to_owned()) {
        return Err(Reject::new(
            RejectReason::InvalidToolName,
            format!("tool {name} appears twice"),
        ));
    }
    Ok(())
}

/// Both schemas compile; `parameters` is an object schema.
fn check_schemas(name: &str, parameters: &Value, outputs: &Value) -> Result<(), Box<Reject>> {
    let bad = |what: &str, why: String| {
        Err(Reject::new(
            RejectReason::InvalidToolSchema,
            format!("tool {name}: {what}: {why}"),
        ))
    };
    if let Err(e) = Schema::compile(parameters) {
        return bad("parameters", e.to_string());
    }
    if parameters.get("type").and_then(Value::as_str) != Some("object") {
        return bad("parameters", "must be an object schema".into());
    }
    if let Err(e) = Schema::compile(outputs) {
        return bad("outputs", e.to_string());
    }
    Ok(())
}
