//! The world's side of an episode: the state, the recorded facts, the user's revealed slots;
//! shared by the live environment and the reader of saved conversations.

use super::parse::tag;
use crate::llm::ParsedCall;
use crate::tooluse::mock_tools::{canonical_json, execute_state_tool, state_hash};
use crate::tooluse::rubric::{Event, Trajectory};
use crate::tooluse::task::{CompiledTask, ToolBackend, WorldState};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The world's side of an episode: state, facts, and the user's revealed slots.
pub(super) struct Recorder {
    world: Arc<CompiledTask>,
    state: Option<WorldState>,
    pub(super) events: Vec<Event>,
    pub(super) revealed: BTreeSet<String>,
}

/// Answers a mapping tool: `Ok(Some(response))`, `Ok(None)` when unknown, or an error text.
pub(super) type MappedFn<'a> = dyn FnMut(&str, &Value) -> Result<Option<Value>, String> + 'a;

/// What a tool call produced: the response text.
pub(super) struct CallOutcome {
    pub(super) content: String,
}

impl Recorder {
    pub(super) fn new(world: Arc<CompiledTask>) -> Self {
        Recorder {
            state: world.task.initial_state.clone(),
            world,
            events: Vec::new(),
            revealed: BTreeSet::new(),
        }
    }

    pub(super) fn error(&mut self, step: u32, tool: &str, reason: String) -> CallOutcome {
        self.events.push(Event::ToolError {
            step,
            tool: tool.to_owned(),
            reason: reason.clone(),
        });
        CallOutcome {
            content: canonical_json(&json!({ "error": reason })),
        }
    }

    /// Validates and runs one call. `mapped` answers mapping tools: `Ok(Some(response))`,
    /// `Ok(None)` when the response is not known (reading saved messages: taken from the
    /// conversation), or a simulator error.
    pub(super) fn call(
        &mut self,
        step: u32,
        call: &ParsedCall,
        mapped: &mut MappedFn<'_>,
    ) -> Option<CallOutcome> {
        let args = match &call.args {
            Ok(a) => a.clone(),
            Err(reason) => {
                self.events.push(Event::ToolCall {
                    step,
                    tool: call.name.clone(),
                    args: Value::String(call.raw.clone()),
                });
                return Some(self.error(step, &call.name, reason.clone()));
            }
        };
        self.events.push(Event::ToolCall {
            step,
            tool: call.name.clone(),
            args: args.clone(),
        });
        let world = self.world.clone();
        let Some(tool) = world.task.tool(&call.name) else {
            let names: Vec<&str> = world.task.tools.iter().map(|t| t.name.as_str()).collect();
            return Some(self.error(
                step,
                &call.name,
                format!(
                    "unknown tool {:?}; available: {}",
                    call.name,
                    names.join(", ")
                ),
            ));
        };
        if let Err(e) = world.params[&tool.name].validate(&args) {
            return Some(self.error(step, &tool.name, format!("invalid arguments: {e}")));
        }
        let result = match &tool.backend {
            ToolBackend::State { .. } => {
                let state = self.state.get_or_insert_with(WorldState::new);
                let map = args.as_object().cloned().unwrap_or_default();
                execute_state_tool(tool, &map, state).map(Some)
            }
            ToolBackend::Mapping => mapped(&tool.name, &args),
        };
        match result {
            Ok(Some(response)) => {
                self.events.push(Event::ToolResult {
                    step,
                    tool: tool.name.clone(),
                    result: response.clone(),
                });
                Some(CallOutcome {
                    content: canonical_json(&response),
                })
            }
            Ok(None) => None,
            Err(reason) => Some(self.error(step, &tool.name, reason)),
        }
    }

    /// Records a tool message read back from a conversation (mapping tools).
    pub(super) fn tool_message(&mut self, step: u32, tool: &str, content: &str) {
        let body = tag(content, "tool_response").unwrap_or(content).trim();
        match serde_json::from_str::<Value>(body) {
            Ok(Value::Object(map)) if map.len() == 1 && map.contains_key("error") => {
                let reason = match &map["error"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                self.events.push(Event::ToolError {
                    step,
                    tool: tool.to_owned(),
                    reason,
                });
            }
            Ok(v) => self.events.push(Event::ToolResult {
                step,
                tool: tool.to_owned(),
                result: v,
            }),
            Err(_) => self.events.push(Event::ToolResult {
                step,
                tool: tool.to_owned(),
                result: Value::String(body.to_owned()),
            }),
        }
    }

    pub(super) fn user_reply(&mut self, step: u32, text: &str, revealed: &[String]) {
        self.events.push(Event::UserSaid {
            step,
            text: text.to_owned(),
        });
        for slot in revealed {
            self.revealed.insert(slot.clone());
            self.events.push(Event::UserRevealed {
                step,
                slot: slot.clone(),
            });
        }
    }

    pub(super) fn trajectory(&self, turns: u32) -> Trajectory {
        let state_matches = match (&self.world.task.expected_state, &self.state) {
            (Some(expected), Some(state)) => Some(same_state(expected, state)),
            (Some(_), None) => Some(false),
            _ => None,
        };
        Trajectory {
            events: self.events.clone(),
            final_state: self.state.clone(),
            state_matches,
            turns,
        }
    }
}

/// Whether two world states are equal as canonical JSON (tables that are empty count as absent).
pub fn same_state(a: &WorldState, b: &WorldState) -> bool {
    let strip = |s: &WorldState| {
        let kept: WorldState = s
            .iter()
            .filter(|(_, r)| !r.is_empty())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        state_hash(&kept)
    };
    strip(a) == strip(b)
}
