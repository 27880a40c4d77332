//! The router and serving, the error responses, and the health, metadata and stateless
//! simulation-mode routes.

use super::ServerConfig;
use super::app::{App, Failure};
use super::listing::{list_environments, num_tasks, splits, task, task_range, tasks};
use super::rpc::http_mcp;
use super::schema::{openapi, schema};
use super::session::Session;
use super::ws::ws;
use crate::sessions::{ConnectionLimits, SessionTable};
use crate::toolcall::World;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The OpenEnv application over `world`: its session table (with the reaper that closes idle
/// and over-age sessions, started here), the WebSocket, the HTTP simulation and MCP routes and
/// the listing routes, with `cfg`'s message bound. [`serve`] puts it behind the connection
/// layer.
pub fn router(world: Arc<World>, cfg: ServerConfig) -> crate::Result<Router> {
    let sessions = Arc::new(SessionTable::new(cfg.sessions.clone())?);
    let app = Arc::new(App {
        world,
        sessions,
        cfg: cfg.clone(),
        next: AtomicU64::new(1),
        ids: std::hash::RandomState::new(),
        sockets: std::sync::atomic::AtomicUsize::new(0),
        resets: Arc::new(crate::sessions::EpisodeBudget::new(
            cfg.max_resets_per_client,
        )),
    });
    // Closes idle and over-age sessions (their sockets end; their episodes are dropped). The
    // task holds the table weakly and ends with it.
    app.sessions
        .spawn_reaper(|_, s: Arc<Session>| async move { s.close.close() });
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
        max_body_bytes: cfg.max_message_bytes,
        body_timeout: cfg.body_timeout,
        drain_timeout: Duration::from_secs(5),
    };
    let app = router(world, cfg)?;
    crate::sessions::serve_connections(listener, app, limits).await?;
    Ok(())
}

pub(super) fn http_error(status: StatusCode, message: impl Into<String>) -> Response {
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

/// `{"status": "healthy"}` (OpenEnv's), with the live and ended session counts, the
/// WebSockets attached to them and the curriculum's level, draws and reports (if served).
async fn health(State(app): State<Arc<App>>) -> Json<Value> {
    let mut health = json!({
        "status": "healthy",
        "sessions": app.sessions.len(),
        "sessions_ended": app.sessions.ended(),
        "websockets": app.sockets.load(std::sync::atomic::Ordering::Relaxed),
    });
    if let Some(c) = app.world.curriculum_state() {
        health["curriculum"] = json!({"level": c.level, "draws": c.draws, "reports": c.reports});
    }
    Json(health)
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
