//! OpenEnv's JSON-RPC: `/mcp` over HTTP and the WebSocket's `mcp` messages (sessions, tools).

use super::app::App;
use super::session::Session;
use crate::sessions::refusal_response;
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::sync::Arc;

fn rpc_ok(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "result": result, "id": id})
}

fn rpc_err(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "error": {"code": code, "message": message.into()}, "id": id})
}

pub(super) async fn http_mcp(State(app): State<Arc<App>>, body: axum::body::Bytes) -> Response {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return Json(rpc_err(&Value::Null, -32700, format!("parse error: {e}")))
                .into_response();
        }
    };
    // A refused session is answered as every server refuses one: 503 with Retry-After. The
    // admission itself decides (a check before it could pass for two requests racing for the
    // last slot, and the loser would get a JSON-RPC error in a 200).
    if request.get("method").and_then(Value::as_str) == Some("openenv/session/create") {
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        return match create_session(&app) {
            Ok(sid) => Json(rpc_ok(&id, json!({"session_id": sid}))).into_response(),
            Err(why) => refusal_response(&why),
        };
    }
    Json(rpc(&app, request, None).await).into_response()
}

/// Admits a new session (`openenv/session/create`): its id, or why it was refused.
fn create_session(app: &App) -> Result<String, crate::sessions::SessionError> {
    let sid = app.session_id();
    app.sessions.admit(sid.clone(), Session::new())?;
    Ok(sid)
}

/// Answers one JSON-RPC request of OpenEnv's `/mcp` (HTTP) or a WebSocket `mcp` message
/// (`bound`: the WebSocket's own session).
pub(super) async fn rpc(app: &Arc<App>, request: Value, bound: Option<&Arc<Session>>) -> Value {
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = request.get("method").and_then(Value::as_str) else {
        return rpc_err(&id, -32600, "invalid request: no method");
    };
    let params = match request.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return rpc_err(&id, -32602, "params must be an object"),
    };
    let named = |params: &Map<String, Value>| -> Result<Option<Arc<Session>>, Value> {
        match params.get("session_id") {
            None | Some(Value::Null) => Ok(bound.cloned()),
            Some(Value::String(sid)) => match app.sessions.get(sid) {
                Some(s) => Ok(Some(s)),
                None => Err(rpc_err(&id, -32600, format!("unknown session_id {sid:?}"))),
            },
            Some(v) => Err(rpc_err(
                &id,
                -32602,
                format!("session_id must be a string, got {v}"),
            )),
        }
    };
    match method {
        "openenv/session/create" => match create_session(app) {
            Ok(sid) => rpc_ok(&id, json!({"session_id": sid})),
            Err(e) => rpc_err(&id, -32000, e.to_string()),
        },
        "openenv/session/close" => match params.get("session_id").and_then(Value::as_str) {
            Some(sid) => {
                let sid = sid.to_owned();
                let session = app.sessions.get(&sid);
                let closed = app.sessions.remove(&sid);
                if let Some(s) = session {
                    s.close.close();
                }
                rpc_ok(&id, json!({"session_id": sid, "closed": closed}))
            }
            None => rpc_err(&id, -32602, "openenv/session/close needs session_id"),
        },
        "tools/list" => {
            let session = match named(&params) {
                Ok(s) => s.unwrap_or_else(Session::new),
                Err(e) => return e,
            };
            match app.step(&session, json!({"type": "list_tools"})).await {
                Ok(v) => {
                    let tools: Vec<Value> = v["observation"]["tools"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|t| {
                            json!({"name": t["name"], "description": t["description"],
                                   "inputSchema": t["input_schema"]})
                        })
                        .collect();
                    rpc_ok(&id, json!({"tools": tools}))
                }
                Err(f) => rpc_err(&id, -32603, f.message),
            }
        }
        "tools/call" => {
            let session = match named(&params) {
                Ok(s) => s.unwrap_or_else(Session::new),
                Err(e) => return e,
            };
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return rpc_err(&id, -32602, "tools/call needs a tool name");
            };
            let action = json!({"type": "call_tool", "tool_name": name,
                                "arguments": params.get("arguments").cloned().unwrap_or(json!({}))});
            match app.step(&session, action).await {
                Ok(v) => {
                    let obs = &v["observation"];
                    if obs["error"].is_object() {
                        let code = match obs["error"]["error_type"].as_str() {
                            Some("execution_error") => -32603,
                            _ => -32602,
                        };
                        let msg = obs["error"]["message"].as_str().unwrap_or("tool failed");
                        rpc_err(&id, code, msg)
                    } else {
                        rpc_ok(&id, obs["result"].clone())
                    }
                }
                Err(f) => rpc_err(&id, -32602, f.message),
            }
        }
        other => rpc_err(&id, -32601, format!("method not found: {other}")),
    }
}
