//! OpenEnv's wire protocol (openenv 0.10) over axum: WebSocket sessions at `/ws`, OpenEnv's
//! JSON-RPC at `/mcp` (tools and HTTP sessions), the stateless simulation-mode routes, the
//! schema and metadata routes and the task-listing API.

use super::OpenEnvError;
use super::episode::{CallOutcome, Episode, ToolFault};
use super::world::{ResetRequest, World};
use crate::sessions::{ConnectionLimits, SessionLimits, SessionTable};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;

/// Server bounds.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Live sessions (WebSocket or HTTP-created), their idle timeout and longest life; the
    /// same cap bounds open connections.
    pub sessions: SessionLimits,
    /// Largest HTTP request body and WebSocket message, in bytes.
    pub max_message_bytes: usize,
    /// Time for a request's headers to arrive.
    pub header_timeout: Duration,
    /// Longest one reset or tool call may run (a simulator LLM call, the rubric); beyond it
    /// the call answers an error and the session stays usable.
    pub call_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            sessions: SessionLimits::default(),
            max_message_bytes: 1 << 20,
            header_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(120),
        }
    }
}

/// One client's episode, and the signal that closes its WebSocket.
struct Session {
    episode: Mutex<Option<Episode>>,
    episode_id: Mutex<Option<String>>,
    steps: AtomicU64,
    close: Notify,
}

impl Session {
    fn new() -> Arc<Self> {
        Arc::new(Session {
            episode: Mutex::new(None),
            episode_id: Mutex::new(None),
            steps: AtomicU64::new(0),
            close: Notify::new(),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct App {
    world: Arc<World>,
    sessions: Arc<SessionTable<String, Arc<Session>>>,
    cfg: ServerConfig,
    next: AtomicU64,
    ids: std::hash::RandomState,
}

/// A failure answered to the client: an error frame (WebSocket) or status (HTTP).
#[derive(Debug)]
struct Failure {
    code: &'static str,
    message: String,
}

impl Failure {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl App {
    fn session_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}{:08x}", self.ids.hash_one(n), n)
    }

    /// Runs blocking episode work off the async threads, bounded by the call timeout.
    async fn blocking<T: Send + 'static>(
        &self,
        job: impl FnOnce() -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, Failure> {
        let task = tokio::task::spawn_blocking(job);
        match tokio::time::timeout(self.cfg.call_timeout, task).await {
            Ok(Ok(r)) => r,
            Ok(Err(join)) => Err(Failure::new(
                "EXECUTION_ERROR",
                format!("the call failed: {join}"),
            )),
            Err(_) => Err(Failure::new(
                "EXECUTION_ERROR",
                format!(
                    "the call ran past {} s and was abandoned",
                    self.cfg.call_timeout.as_secs_f64()
                ),
            )),
        }
    }

    /// Starts the episode `data` asks for in `session`; returns the reset payload.
    async fn reset(&self, session: &Arc<Session>, data: Value) -> Result<Value, Failure> {
        let data = if data.is_null() { json!({}) } else { data };
        let req: ResetRequest = serde_json::from_value(data).map_err(|e| {
            Failure::new(
                "VALIDATION_ERROR",
                format!(
                    "bad reset arguments: {e} (accepted: seed, episode_id, question_id, \
                     task_id, split, index)"
                ),
            )
        })?;
        let world = self.world.clone();
        let s = session.clone();
        self.blocking(move || {
            let episode = world
                .episode(&req)
                .map_err(|e| Failure::new("EXECUTION_ERROR", e.to_string()))?;
            let opening = episode.opening();
            *lock(&s.episode) = Some(episode);
            *lock(&s.episode_id) = req.episode_id;
            s.steps.store(0, Ordering::Relaxed);
            Ok(payload(opening, None, false))
        })
        .await
    }

    /// Applies an action (`list_tools` or `call_tool`) to the session's episode, starting the
    /// next one first when the session has none.
    async fn step(&self, session: &Arc<Session>, data: Value) -> Result<Value, Failure> {
        let action = Action::parse(&data)?;
        let world = self.world.clone();
        let s = session.clone();
        self.blocking(move || {
            let mut ep = lock(&s.episode);
            if ep.is_none() {
                let fresh = world
                    .episode(&ResetRequest::default())
                    .map_err(|e| Failure::new("EXECUTION_ERROR", e.to_string()))?;
                *ep = Some(fresh);
            }
            let episode = ep.as_mut().expect("set above");
            s.steps.fetch_add(1, Ordering::Relaxed);
            Ok(match action {
                Action::ListTools => payload(
                    json!({"tools": episode.tools(), "metadata": {}}),
                    Some(episode.reward()),
                    episode.done(),
                ),
                Action::Call { name, arguments } => {
                    let outcome = episode.call(&name, &arguments);
                    call_payload(&name, outcome, episode)
                }
            })
        })
        .await
    }

    fn state(&self, session: &Session) -> Value {
        let mut m = Map::new();
        m.insert("episode_id".into(), json!(*lock(&session.episode_id)));
        m.insert(
            "step_count".into(),
            json!(session.steps.load(Ordering::Relaxed)),
        );
        if let Some(ep) = lock(&session.episode).as_ref() {
            m.extend(ep.state_fields());
        }
        Value::Object(m)
    }
}

/// An action of `step`, as OpenEnv's `ListToolsAction` / `CallToolAction` send it.
enum Action {
    ListTools,
    Call {
        name: String,
        arguments: Map<String, Value>,
    },
}

impl Action {
    fn parse(data: &Value) -> Result<Self, Failure> {
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
fn payload(observation: Value, reward: Option<f64>, done: bool) -> Value {
    json!({"observation": observation, "reward": reward, "done": done})
}

/// FastMCP's tool result, as OpenEnv's `CallToolObservation.result` carries it.
fn tool_result(text: &str, outcome: Option<&CallOutcome>) -> Value {
    json!({
        "content": [{"type": "text", "text": text}],
        "structured_content": null,
        "meta": outcome.map(|o| json!({"reward": o.reward, "done": o.done})),
        "data": text,
        "is_error": false,
    })
}

fn call_payload(name: &str, outcome: Result<CallOutcome, ToolFault>, episode: &Episode) -> Value {
    match outcome {
        Ok(o) => payload(
            json!({"tool_name": name, "result": tool_result(&o.text, Some(&o)),
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

/// The routes of an OpenEnv server over `world`, and the session table they share (the
/// caller runs its reaper).
pub fn router(world: Arc<World>, cfg: ServerConfig) -> crate::Result<Router> {
    let sessions = Arc::new(SessionTable::new(cfg.sessions.clone())?);
    let app = Arc::new(App {
        world,
        sessions,
        cfg: cfg.clone(),
        next: AtomicU64::new(1),
        ids: std::hash::RandomState::new(),
    });
    // Closes idle and over-age sessions (their sockets end; their episodes are dropped). The
    // task holds the table weakly and ends with it.
    app.sessions
        .spawn_reaper(|_, s: Arc<Session>| async move { s.close.notify_one() });
    Ok(Router::new()
        .route("/health", get(health))
        .route("/metadata", get(metadata))
        .route("/schema", get(schema))
        .route("/openapi.json", get(openapi))
        .route("/reset", post(http_reset))
        .route("/step", post(http_step))
        .route("/state", get(http_state))
        .route("/mcp", post(http_mcp))
        .route("/ws", get(ws))
        .route("/list_environments", get(list_environments))
        .route("/{env}/splits", get(splits))
        .route("/{env}/tasks", post(tasks))
        .route("/{env}/num_tasks", post(num_tasks))
        .route("/{env}/task", post(task))
        .route("/{env}/task_range", post(task_range))
        .layer(DefaultBodyLimit::max(cfg.max_message_bytes))
        .with_state(app))
}

/// Serves `world` on `listener` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    world: Arc<World>,
    cfg: ServerConfig,
) -> crate::Result<()> {
    let limits = ConnectionLimits {
        sessions: cfg.sessions.clone(),
        header_timeout: cfg.header_timeout,
        drain_timeout: Duration::from_secs(5),
    };
    let app = router(world, cfg)?;
    crate::sessions::serve_connections(listener, app, limits).await?;
    Ok(())
}

fn http_error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({"detail": message.into()}))).into_response()
}

fn failure_response(f: Failure) -> Response {
    let status = match f.code {
        "VALIDATION_ERROR" | "INVALID_JSON" => StatusCode::UNPROCESSABLE_ENTITY,
        "CAPACITY_REACHED" => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    http_error(status, f.message)
}

/// `{"status": "healthy"}` (OpenEnv's), with the live and ended session counts.
async fn health(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({
        "status": "healthy",
        "sessions": app.sessions.len(),
        "sessions_ended": app.sessions.ended(),
    }))
}

async fn metadata(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({
        "name": app.world.name,
        "description": app.world.description(),
        "readme_content": null,
        "version": env!("CARGO_PKG_VERSION"),
        "author": "rulegym",
        "documentation_url": "https://github.com/rulegym/rulegym/blob/main/docs/protocols.md",
    }))
}

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

async fn schema() -> Json<Value> {
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

async fn openapi() -> Json<Value> {
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

/// Stateless `POST /reset` (simulation mode): the opening of the episode the body asks for.
async fn http_reset(State(app): State<Arc<App>>, body: Option<Json<Value>>) -> Response {
    let session = Session::new();
    let data = body.map(|Json(v)| v).unwrap_or(Value::Null);
    match app.reset(&session, data).await {
        Ok(v) => Json(v).into_response(),
        Err(f) => failure_response(f),
    }
}

/// Stateless `POST /step` (simulation mode): the action applied to a fresh episode.
async fn http_step(State(app): State<Arc<App>>, body: Option<Json<Value>>) -> Response {
    let Some(Json(Value::Object(mut body))) = body else {
        return http_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "expected {\"action\": {...}}",
        );
    };
    let Some(action) = body.remove("action") else {
        return http_error(StatusCode::UNPROCESSABLE_ENTITY, "missing \"action\"");
    };
    let session = Session::new();
    match app.step(&session, action).await {
        Ok(v) => Json(v).into_response(),
        Err(f) => failure_response(f),
    }
}

async fn http_state() -> Json<Value> {
    Json(json!({"episode_id": null, "step_count": 0}))
}

fn rpc_ok(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "result": result, "id": id})
}

fn rpc_err(id: &Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "error": {"code": code, "message": message.into()}, "id": id})
}

async fn http_mcp(State(app): State<Arc<App>>, body: axum::body::Bytes) -> Json<Value> {
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return Json(rpc_err(&Value::Null, -32700, format!("parse error: {e}"))),
    };
    Json(rpc(&app, request, None).await)
}

/// Answers one JSON-RPC request of OpenEnv's `/mcp` (HTTP) or a WebSocket `mcp` message
/// (`bound`: the WebSocket's own session).
async fn rpc(app: &Arc<App>, request: Value, bound: Option<&Arc<Session>>) -> Value {
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
        "openenv/session/create" => {
            let sid = app.session_id();
            match app.sessions.admit(sid.clone(), Session::new()) {
                Ok(()) => rpc_ok(&id, json!({"session_id": sid})),
                Err(e) => rpc_err(&id, -32000, e.to_string()),
            }
        }
        "openenv/session/close" => match params.get("session_id").and_then(Value::as_str) {
            Some(sid) => {
                let sid = sid.to_owned();
                let session = app.sessions.get(&sid);
                let closed = app.sessions.remove(&sid);
                if let Some(s) = session {
                    s.close.notify_one();
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

async fn ws(
    State(app): State<Arc<App>>,
    Query(query): Query<HashMap<String, String>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    // Attach to an HTTP-created session (MCPToolClient), or open one for this socket.
    let session = match query.get("session_id") {
        Some(sid) => match app.sessions.get(sid) {
            Some(s) => (sid.clone(), s),
            None => {
                return http_error(StatusCode::NOT_FOUND, format!("unknown session_id {sid:?}"));
            }
        },
        None => {
            let sid = app.session_id();
            let s = Session::new();
            if let Err(e) = app.sessions.admit(sid.clone(), s.clone()) {
                // Refused after the upgrade with OpenEnv's error frame, as its clients expect.
                let message = e.to_string();
                return upgrade.on_upgrade(move |mut socket| async move {
                    let frame = json!({"type": "error",
                                       "data": {"message": message, "code": "CAPACITY_REACHED"}});
                    let _ = socket.send(Message::Text(frame.to_string().into())).await;
                    let _ = socket.send(Message::Close(None)).await;
                });
            }
            (sid, s)
        }
    };
    let max = app.cfg.max_message_bytes;
    upgrade
        .max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| run_socket(app, socket, session))
}

fn error_frame(f: Failure) -> Value {
    json!({"type": "error", "data": {"message": f.message, "code": f.code}})
}

/// One WebSocket: messages `reset`, `step`, `state`, `mcp`, `close`, answered in order. The
/// session ends with the socket (however it ends), or when the reaper closes it.
async fn run_socket(app: Arc<App>, mut socket: WebSocket, (sid, session): (String, Arc<Session>)) {
    loop {
        let message = tokio::select! {
            m = socket.recv() => m,
            _ = session.close.notified() => break,
        };
        let text = match message {
            Some(Ok(Message::Text(t))) => t.to_string(),
            Some(Ok(Message::Binary(b))) => String::from_utf8_lossy(&b).into_owned(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
        };
        app.sessions.touch(&sid);
        let reply = match serde_json::from_str::<Value>(&text) {
            Err(e) => error_frame(Failure::new("INVALID_JSON", format!("invalid JSON: {e}"))),
            Ok(msg) => {
                let data = msg.get("data").cloned().unwrap_or(Value::Null);
                match msg.get("type").and_then(Value::as_str) {
                    Some("reset") => match app.reset(&session, data).await {
                        Ok(v) => json!({"type": "observation", "data": v}),
                        Err(f) => error_frame(f),
                    },
                    Some("step") => match app.step(&session, data).await {
                        Ok(v) => json!({"type": "observation", "data": v}),
                        Err(f) => error_frame(f),
                    },
                    Some("state") => json!({"type": "state", "data": app.state(&session)}),
                    Some("mcp") => {
                        json!({"type": "mcp", "data": rpc(&app, data, Some(&session)).await})
                    }
                    Some("close") => break,
                    Some(other) => error_frame(Failure::new(
                        "UNKNOWN_TYPE",
                        format!("unknown message type {other:?} (reset, step, state, mcp, close)"),
                    )),
                    None => error_frame(Failure::new("UNKNOWN_TYPE", "message has no \"type\"")),
                }
            }
        };
        if socket
            .send(Message::Text(reply.to_string().into()))
            .await
            .is_err()
        {
            break;
        }
    }
    app.sessions.remove(&sid);
    let _ = socket.send(Message::Close(None)).await;
}

async fn list_environments(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!([app.world.name]))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SplitBody {
    split: String,
    #[serde(default)]
    index: Option<i64>,
    #[serde(default)]
    start: Option<i64>,
    #[serde(default)]
    stop: Option<i64>,
}

type JsonBody = Result<Json<SplitBody>, axum::extract::rejection::JsonRejection>;

/// 404 unless `env` names this server's environment (case-insensitively, as OpenEnv matches).
fn unknown_env(app: &App, env: &str) -> Option<Response> {
    (!env.eq_ignore_ascii_case(&app.world.name)).then(|| {
        http_error(
            StatusCode::NOT_FOUND,
            format!(
                "unknown environment {env:?} (this server has {:?})",
                app.world.name
            ),
        )
    })
}

/// Answers a task-listing request: the environment name checked, the body parsed, then `list`.
fn listing(
    app: &App,
    env: &str,
    body: JsonBody,
    list: impl FnOnce(&World, SplitBody) -> Result<Value, OpenEnvError>,
) -> Response {
    if let Some(r) = unknown_env(app, env) {
        return r;
    }
    let body = match body {
        Ok(Json(b)) => b,
        Err(e) => return http_error(StatusCode::UNPROCESSABLE_ENTITY, e.body_text()),
    };
    match list(&app.world, body) {
        Ok(v) => Json(v).into_response(),
        Err(e @ OpenEnvError::BadIndex { .. }) => {
            http_error(StatusCode::BAD_REQUEST, format!("Invalid task index: {e}"))
        }
        Err(e) => http_error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

async fn splits(State(app): State<Arc<App>>, Path(env): Path<String>) -> Response {
    if let Some(r) = unknown_env(&app, &env) {
        return r;
    }
    Json(json!(app.world.split_records())).into_response()
}

async fn tasks(State(app): State<Arc<App>>, Path(env): Path<String>, body: JsonBody) -> Response {
    let name = app.world.name.clone();
    listing(&app, &env, body, |w, b| {
        Ok(json!({"tasks": w.task_range(&b.split, None, None)?, "env_name": name}))
    })
}

async fn num_tasks(
    State(app): State<Arc<App>>,
    Path(env): Path<String>,
    body: JsonBody,
) -> Response {
    listing(&app, &env, body, |w, b| {
        Ok(json!({"num_tasks": w.num_tasks(&b.split)?}))
    })
}

async fn task(State(app): State<Arc<App>>, Path(env): Path<String>, body: JsonBody) -> Response {
    listing(&app, &env, body, |w, b| {
        let index = b.index.ok_or(OpenEnvError::MissingIndex)?;
        Ok(json!({"task": w.task(&b.split, index)?}))
    })
}

async fn task_range(
    State(app): State<Arc<App>>,
    Path(env): Path<String>,
    body: JsonBody,
) -> Response {
    listing(&app, &env, body, |w, b| {
        Ok(json!({"tasks": w.task_range(&b.split, b.start, b.stop)?}))
    })
}
