//! A `step` action as OpenEnv's clients send it, and the observation payloads answered.

use super::app::Failure;
use crate::toolcall::{Outcome, ToolFault, ToolSession};
use serde_json::{Map, Value, json};

/// An action of `step`, as OpenEnv's `ListToolsAction` / `CallToolAction` send it.
pub(super) enum Action {
    ListTools,
    Call {
        name: String,
        arguments: Map<String, Value>,
    },
}

impl Action {
    pub(super) fn parse(data: &Value) -> Result<Self, Failure> {
        let bad = |m: String| Failure::new("VALIDATION_ERROR", format!("invalid action: {m}"));
        let Value::Object(obj) = data else {
            return Err(bad(format!("expected an object, got {data}")));
        };
        let allowed: &[&str] = match obj.get("type").and_then(Value::as_str) {
            Some("list_tools") => &["type", "metadata"],
            Some("call_tool") => &["type", "tool_name", "arguments", "metadata"],
            Some(other) => {
                return Err(bad(format!(
                    "unknown action type {other:?} (list_tools, call_tool)"
                )));
            }
            None => return Err(bad("no \"type\" (list_tools or call_tool)".into())),
        };
        if let Some(extra) = obj.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(bad(format!("unknown field {extra:?}")));
        }
        if obj.get("type").and_then(Value::as_str) == Some("list_tools") {
            return Ok(Action::ListTools);
        }
        let name = match obj.get("tool_name") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => return Err(bad(format!("tool_name must be a string, got {v}"))),
            None => return Err(bad("call_tool needs tool_name".into())),
        };
        let arguments = match obj.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(v) => return Err(bad(format!("arguments must be an object, got {v}"))),
        };
        Ok(Action::Call { name, arguments })
    }
}

/// OpenEnv's serialised observation: `{observation, reward, done}`.
pub(super) fn payload(observation: Value, reward: Option<f64>, done: bool) -> Value {
    json!({"observation": observation, "reward": reward, "done": done})
}

/// FastMCP's tool result, as OpenEnv's `CallToolObservation.result` carries it.
fn tool_result(o: &Outcome) -> Value {
    json!({
        "content": [{"type": "text", "text": o.text}],
        "structured_content": if o.data.is_null() { Value::Null } else { o.data.clone() },
        "meta": {"reward": o.reward, "done": o.done},
        "data": o.text,
        "is_error": o.is_error,
    })
}

pub(super) fn call_payload(
    name: &str,
    outcome: Result<Outcome, ToolFault>,
    episode: &ToolSession,
) -> Value {
    match outcome {
        Ok(o) => payload(
            json!({"tool_name": name, "result": tool_result(&o),
                   "error": null, "metadata": {}}),
            Some(o.reward),
            o.done,
        ),
        Err(fault) => payload(
            json!({"tool_name": name, "result": null,
                   "error": {"error_type": fault.kind(), "message": fault.to_string()},
                   "metadata": {}}),
            Some(episode.reward()),
            episode.done(),
        ),
    }
}
