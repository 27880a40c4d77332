//! The task-listing API: `/list_environments` and `/{env}/splits`, `tasks`, `num_tasks`,
//! `task`, `task_range`.

use super::app::App;
use super::routes::http_error;
use crate::openenv::OpenEnvError;
use crate::toolcall::{World, WorldError};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

pub(super) async fn list_environments(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!([app.world.name]))
}

/// The body of a task-listing request.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SplitBody {
    split: String,
    #[serde(default)]
    index: Option<i64>,
    #[serde(default)]
    start: Option<i64>,
    #[serde(default)]
    stop: Option<i64>,
}

/// A task-listing body, or why it could not be read.
pub(super) type JsonBody = Result<Json<SplitBody>, axum::extract::rejection::JsonRejection>;

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
        Err(e @ OpenEnvError::World(WorldError::BadIndex { .. })) => {
            http_error(StatusCode::BAD_REQUEST, format!("Invalid task index: {e}"))
        }
        Err(e) => http_error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

pub(super) async fn splits(State(app): State<Arc<App>>, Path(env): Path<String>) -> Response {
    if let Some(r) = unknown_env(&app, &env) {
        return r;
    }
    Json(json!(app.world.split_records())).into_response()
}

pub(super) async fn tasks(
    State(app): State<Arc<App>>,
    Path(env): Path<String>,
    body: JsonBody,
) -> Response {
    let name = app.world.name.clone();
    listing(&app, &env, body, |w, b| {
        Ok(json!({"tasks": w.task_range(&b.split, None, None)?, "env_name": name}))
    })
}

pub(super) async fn num_tasks(
    State(app): State<Arc<App>>,
    Path(env): Path<String>,
    body: JsonBody,
) -> Response {
    listing(&app, &env, body, |w, b| {
        Ok(json!({"num_tasks": w.num_tasks(&b.split)?}))
    })
}

pub(super) async fn task(
    State(app): State<Arc<App>>,
    Path(env): Path<String>,
    body: JsonBody,
) -> Response {
    listing(&app, &env, body, |w, b| {
        let index = b.index.ok_or(OpenEnvError::MissingIndex)?;
        Ok(json!({"task": w.task(&b.split, index)?}))
    })
}

pub(super) async fn task_range(
    State(app): State<Arc<App>>,
    Path(env): Path<String>,
    body: JsonBody,
) -> Response {
    listing(&app, &env, body, |w, b| {
        Ok(json!({"tasks": w.task_range(&b.split, b.start, b.stop)?}))
    })
}
