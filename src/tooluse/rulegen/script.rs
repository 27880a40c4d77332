//! Scripted policies: the reference solution read from a task's workflow, and each step's
//! assistant message.

use super::RuleGenError;
use crate::llm::{ChatMessage, Role};
use crate::tooluse::env::openai_call;
use crate::tooluse::task::Task;
use serde_json::Value;

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
        ScriptStep::Ask { text, .. } => ChatMessage::text(Role::Assistant, text.clone()),
        ScriptStep::Call { tool, args } => ChatMessage {
            role: Role::Assistant,
            content: None,
            tool_calls: vec![openai_call(&format!("call_{turn}"), tool, args)],
            tool_call_id: None,
        },
        ScriptStep::Answer(text) => {
            ChatMessage::text(Role::Assistant, format!("<answer>{text}</answer>"))
        }
    }
}
