//! The schema and OpenAPI routes.

use axum::Json;
use serde_json::{Map, Value, json};

fn action_schema() -> Value {
    json!({
        "title": "Action",
        "description": "list_tools, or call_tool with a tool's name and arguments",
        "oneOf": [
            {"type": "object", "properties": {"type": {"const": "list_tools"},
             "metadata": {"type": "object"}}, "required": ["type"],
             "additionalProperties": false},
            {"type": "object", "properties": {"type": {"const": "call_tool"},
             "tool_name": {"type": "string"}, "arguments": {"type": "object"},
             "metadata": {"type": "object"}}, "required": ["type", "tool_name"],
             "additionalProperties": false},
        ],
    })
}

pub(super) async fn schema() -> Json<Value> {
    Json(json!({
        "action": action_schema(),
        "observation": {
            "title": "Observation", "type": "object",
            "description": "list_tools: {tools}; call_tool: {tool_name, result, error}; \
                reward is the exact reward once done (set F1 or rubric score), 0 before",
            "properties": {
                "done": {"type": "boolean"}, "reward": {"type": ["number", "null"]},
                "metadata": {"type": "object"}, "tools": {"type": "array"},
                "tool_name": {"type": "string"}, "result": {},
                "error": {"type": ["object", "null"]},
            },
        },
        "state": {
            "title": "State", "type": "object",
            "properties": {
                "episode_id": {"type": ["string", "null"]},
                "step_count": {"type": "integer", "minimum": 0},
                "question_id": {"type": "string"}, "task_id": {"type": "string"},
                "done": {"type": "boolean"}, "reward": {"type": "number"},
            },
            "additionalProperties": true,
        },
        "reset_observation": {
            "title": "ResetObservation", "type": "object",
            "description": "the episode's task: question_id, question and prompt (search), or \
                task_id, instruction, prompt and messages (tool use)",
        },
    }))
}

pub(super) async fn openapi() -> Json<Value> {
    let paths: Map<String, Value> = [
        ("/health", "get"),
        ("/metadata", "get"),
        ("/schema", "get"),
        ("/reset", "post"),
        ("/step", "post"),
        ("/state", "get"),
        ("/mcp", "post"),
        ("/ws", "get"),
        ("/list_environments", "get"),
        ("/{env_name}/splits", "get"),
        ("/{env_name}/tasks", "post"),
        ("/{env_name}/num_tasks", "post"),
        ("/{env_name}/task", "post"),
        ("/{env_name}/task_range", "post"),
    ]
    .into_iter()
    .map(|(p, m)| {
        (
            p.to_owned(),
            json!({m: {"responses": {"200": {"description": "OK"}}}}),
        )
    })
    .collect();
    Json(json!({
        "openapi": "3.1.0",
        "info": {"title": "rulegym OpenEnv server", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
    }))
}
