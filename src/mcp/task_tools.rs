//! The tool-use task session's tools: their list (the task's tools, then `ask_user` and
//! `finish`) and their calls, each played as one assistant message of the task's [`ToolEnv`].

use super::TaskWorld;
use super::args::{QuestionArgs, SummaryArgs, ToolArgs, parse};
use super::error::ToolError;
use super::limits::MAX_ARGS_BYTES;
use super::server::{Episode, lock, ok};
use crate::env::Step;
use crate::llm::ChatMessage;
use crate::tooluse::env::{ToolEnv, openai_call};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex};

/// The tools of a task session: one per task tool (its parameter schema as the input schema),
/// then `ask_user` and `finish`.
pub(super) fn task_tools(w: &TaskWorld) -> Vec<Tool> {
    let mut tools: Vec<Tool> = w
        .task()
        .task
        .tools
        .iter()
        .map(|t| {
            Tool::new(
                t.name.clone(),
                t.description.clone(),
                schema(t.parameters.clone()),
            )
        })
        .collect();
    tools.push(Tool::new(
        "ask_user",
        "Ask the user a question (one question per call); returns the user's reply.",
        QuestionArgs::input_schema().clone(),
    ));
    tools.push(Tool::new(
        "finish",
        "End the episode when the request is done: a short summary for the user. Returns the \
         rubric score of the whole episode.",
        SummaryArgs::input_schema().clone(),
    ));
    tools
}

/// A task tool's parameter schema as an input schema (an object; anything else, none).
fn schema(value: Value) -> Arc<JsonObject> {
    Arc::new(match value {
        Value::Object(map) => map,
        _ => Map::new(),
    })
}

/// Refuses a text the tool-use environment would read as protocol markup.
fn no_markup(field: &'static str, text: &str) -> Result<(), ToolError> {
    match crate::env::protocol_marker(text) {
        Some(marker) => Err(ToolError::ProtocolText { field, marker }),
        None => Ok(()),
    }
}

/// The MCP result of a tool-use step: the observations, and the score when it ended.
fn step_result(step: Step) -> CallToolResult {
    let text = step
        .observations
        .iter()
        .map(ChatMessage::content_str)
        .collect::<Vec<_>>()
        .join("\n");
    if step.done {
        let reason = step.metadata.get("reason").cloned().unwrap_or(Value::Null);
        let rubric = step.metadata.get("rubric").cloned().unwrap_or(Value::Null);
        let mut out = format!(
            "Episode over ({}). Score: {}.",
            reason.as_str().unwrap_or("ended"),
            step.reward
        );
        if !text.is_empty() {
            out = format!("{text}\n{out}");
        }
        return ok(
            out,
            json!({"score": step.reward, "done": true, "reason": reason, "rubric": rubric}),
        );
    }
    let is_error = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.len() == 1 && o.contains_key("error"))
        })
        .unwrap_or(false);
    if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    }
}

fn over_reason(env: &ToolEnv) -> String {
    match env.result() {
        Some(r) => format!("score {}", r.reward),
        None => "ended".into(),
    }
}

/// Runs a tool call of a task session (blocking: simulators and the rubric engine).
pub(super) fn call_task(
    w: &TaskWorld,
    episode: &Mutex<Episode>,
    call_id: String,
    name: &str,
    args: &JsonObject,
) -> Result<CallToolResult, ToolError> {
    let mut ep = lock(episode);
    let Episode::Task(env) = &mut *ep else {
        return Err(ToolError::Failed("not a task session".into()));
    };
    if env.is_done() {
        return Err(ToolError::EpisodeOver(over_reason(env)));
    }
    let message = match name {
        "ask_user" => {
            let a: QuestionArgs = parse(name, args)?;
            no_markup("question", &a.question)?;
            if a.question.trim().is_empty() {
                return Err(ToolError::BadArguments {
                    tool: name.into(),
                    message: "question is empty".into(),
                });
            }
            ChatMessage::text(
                crate::llm::Role::Assistant,
                format!("<question>{}</question>", a.question),
            )
        }
        "finish" => {
            let a: SummaryArgs = parse(name, args)?;
            no_markup("summary", &a.summary)?;
            ChatMessage::text(
                crate::llm::Role::Assistant,
                format!("<answer>{}</answer>", a.summary),
            )
        }
        tool => {
            debug_assert!(w.task().task.tool(tool).is_some());
            let value = Value::Object(args.clone());
            let len = value.to_string().len();
            if len > MAX_ARGS_BYTES {
                return Err(ToolError::TooLong {
                    field: "arguments (bytes of JSON)",
                    len,
                    max: MAX_ARGS_BYTES,
                });
            }
            ChatMessage {
                role: crate::llm::Role::Assistant,
                content: None,
                tool_calls: vec![openai_call(&call_id, tool, &value)],
                tool_call_id: None,
            }
        }
    };
    let step = env.step_message(&message)?;
    Ok(step_result(step))
}
