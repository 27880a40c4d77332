//! The tool-use task's tools: the task's own, then `ask_user` and `finish`, each call played as
//! one assistant message of the task's [`ToolEnv`] (a tool call, a `<question>`, an
//! `<answer>`), so the reward is the environment's rubric score.

use super::limits::MAX_ARGS_BYTES;
use super::params::{BuiltinTool, Param, ParamKind, text};
use super::{Outcome, SessionTool, ToolFault};
use crate::env::{Environment, Step};
use crate::llm::{ChatMessage, Role};
use crate::tooluse::env::{Protocol, ToolEnv, system_prompt};
use serde_json::{Map, Value, json};

/// The tools every task session has besides the task's own: `ask_user`, then `finish`.
pub const BUILTIN_TOOLS: [BuiltinTool; 2] = [
    BuiltinTool {
        name: "ask_user",
        description: "Asks the user one question about their request.",
        params: &[Param {
            name: "question",
            description: "The question for the user.",
            kind: ParamKind::Text { nonblank: true },
            required: true,
        }],
        returns: "The user's reply.",
    },
    BuiltinTool {
        name: "finish",
        description: "Ends the episode once the request is done.",
        params: &[text("summary", "A short summary of what was done.")],
        returns: "The episode's score.",
    },
];

/// What a task tool returns (its docstring's `Returns:`).
const TASK_TOOL_RETURNS: &str = "The tool's response.";

/// Whether `name` is a built-in tool's.
pub(super) fn is_builtin(name: &str) -> bool {
    BUILTIN_TOOLS.iter().any(|t| t.name == name)
}

/// One task episode over tool calls.
pub(super) struct TaskCalls {
    env: ToolEnv,
    task_id: String,
}

impl TaskCalls {
    pub(super) fn new(mut env: ToolEnv, task_id: String) -> crate::Result<Self> {
        if let Some(t) = env.task().task.tools.iter().find(|t| is_builtin(&t.name)) {
            return Err(super::WorldError::ToolNameClash {
                task: task_id,
                tool: t.name.clone(),
            }
            .into());
        }
        env.reset()?;
        Ok(TaskCalls { env, task_id })
    }

    pub(super) fn task_id(&self) -> &str {
        &self.task_id
    }

    pub(super) fn instruction(&self) -> &str {
        &self.env.task().task.instruction
    }

    pub(super) fn tools(&self) -> Vec<SessionTool> {
        let own = self.env.task().task.tools.iter().map(|t| SessionTool {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: match &t.parameters {
                Value::Object(m) => m.clone(),
                _ => Map::from_iter([
                    ("type".to_owned(), json!("object")),
                    ("properties".to_owned(), json!({})),
                ]),
            },
            returns: TASK_TOOL_RETURNS.to_owned(),
        });
        own.chain(BUILTIN_TOOLS.iter().map(BuiltinTool::spec))
            .collect()
    }

    pub(super) fn has_tool(&self, name: &str) -> bool {
        is_builtin(name) || self.env.task().task.tool(name).is_some()
    }

    pub(super) fn done(&self) -> bool {
        self.env.is_done()
    }

    pub(super) fn reward(&self) -> f64 {
        self.env.result().map_or(0.0, |r| r.reward)
    }

    pub(super) fn turns(&self) -> usize {
        self.env
            .transcript()
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count()
    }

    pub(super) fn instructions(&self) -> String {
        let task = &self.env.task().task;
        format!(
            "{}\n\nThe user's request: {}\n\nCall the task's tools, `ask_user` to ask the user, \
             and `finish` with a short summary when the request is done (it returns the score).",
            system_prompt(task, Protocol::OpenAi),
            task.instruction
        )
    }

    pub(super) fn opening(&self) -> Value {
        json!({
            "task_id": self.task_id,
            "instruction": self.instruction(),
            "prompt": self.instructions(),
            "messages": self.env.transcript(),
        })
    }

    pub(super) fn call(
        &mut self,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<Outcome, ToolFault> {
        // `ToolSession::call` checked the name and that the episode goes on.
        let builtin = BUILTIN_TOOLS.iter().find(|t| t.name == name);
        let step = match builtin {
            Some(tool) => {
                let args = tool.parse(args)?;
                let text = match tool.name {
                    "ask_user" => format!("<question>{}</question>", args.required("question")),
                    _ => format!("<answer>{}</answer>", args.required("summary")),
                };
                self.env
                    .step_message(&ChatMessage::text(Role::Assistant, text))?
            }
            None => {
                let value = Value::Object(args.clone());
                let len = value.to_string().len();
                if len > MAX_ARGS_BYTES {
                    return Err(ToolFault::TooLong {
                        field: "arguments (bytes of JSON)".into(),
                        len,
                        max: MAX_ARGS_BYTES,
                    });
                }
                self.env.call_tool(name, &value)?
            }
        };
        Ok(outcome(step))
    }
}

/// Failed simulations a step reports (`simulation_errors`, `user_error`), as data.
fn failures(step: &Step) -> Map<String, Value> {
    ["simulation_errors", "user_error"]
        .into_iter()
        .filter_map(|k| Some((k.to_owned(), step.metadata.get(k)?.clone())))
        .collect()
}

/// What a step of the environment shows the agent: its observations, and the score once it
/// ended; a task tool's `{"error": ...}` response is an error result. The data holds the score
/// of an ended episode and any failed simulations.
fn outcome(step: Step) -> Outcome {
    let mut data = failures(&step);
    let text = step
        .observations
        .iter()
        .map(ChatMessage::content_str)
        .collect::<Vec<_>>()
        .join("\n");
    if step.done {
        let reason = step.metadata.get("reason").cloned().unwrap_or(Value::Null);
        let rubric = step.metadata.get("rubric").cloned().unwrap_or(Value::Null);
        let over = format!(
            "Episode over ({}). Score: {}.",
            reason.as_str().unwrap_or("ended"),
            step.reward
        );
        let text = if text.is_empty() {
            over
        } else {
            format!("{text}\n{over}")
        };
        data.extend([
            ("score".to_owned(), json!(step.reward)),
            ("done".to_owned(), json!(true)),
            ("reason".to_owned(), reason),
            ("rubric".to_owned(), rubric),
        ]);
        return Outcome {
            text,
            data: Value::Object(data),
            is_error: false,
            done: true,
            reward: step.reward,
        };
    }
    let is_error = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| {
            v.as_object()
                .map(|o| o.len() == 1 && o.contains_key("error"))
        })
        .unwrap_or(false);
    Outcome {
        text,
        data: if data.is_empty() {
            Value::Null
        } else {
            Value::Object(data)
        },
        is_error,
        done: false,
        reward: 0.0,
    }
}
